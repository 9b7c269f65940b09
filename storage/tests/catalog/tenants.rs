//! Tenant deletion: every row of one tenant forgotten at once, its objects queued for
//! after the grace, another tenant's rows untouched.

use stackhouse_storage::catalog::{
    DebugFile, DeleteRequest, DeleteState, RuleProgress, Setting, TenantToken,
};
use stackhouse_storage::model::TimeRange;

use crate::fixtures::{commit, cpu, fixture, open, samples_key, series, stacks_key};

suite!(deleting_a_tenant_forgets_its_rows_and_queues_its_objects,);

async fn deleting_a_tenant_forgets_its_rows_and_queues_its_objects(url: String) {
    let cat = open(&url).await;
    let f = fixture(&cat).await;
    let other = series(cpu(), &[("service.name", "web")]);
    cat.commit_segment(&commit("u", "seg-u", &[(&other, 100, 200)]))
        .await
        .unwrap();
    for tenant in ["t", "u"] {
        let setting = Setting {
            name: "pluginSettings".into(),
            value: "{}".into(),
            modified_at_millis: 1,
        };
        cat.put_setting(tenant, &setting).await.unwrap();
        let token = TenantToken {
            id: format!("tok-{tenant}"),
            tenant: tenant.into(),
            name: "ci".into(),
            created_at_millis: 1,
            revoked_at_millis: None,
            admin: true,
            reads: String::new(),
        };
        cat.create_token(&token, &format!("sha-{tenant}")).await.unwrap();
        let file = DebugFile {
            build_id: "abcd".into(),
            object_key: format!("tenants/{tenant}/debuginfo/abcd"),
            file_name: "prog".into(),
            size_bytes: 10,
            uploaded_at_millis: 1,
        };
        cat.put_debug_file(tenant, &file).await.unwrap();
        let request = DeleteRequest {
            id: "d".into(),
            selector: "{}".into(),
            from_nanos: 0,
            to_nanos: 1,
            created_at_millis: 1,
            cancel_until_millis: 2,
            state: DeleteState::Pending,
            matched_series: 0,
            matched_samples: 0,
        };
        cat.add_delete_request(tenant, &request).await.unwrap();
        cat.upsert_recording_rule(tenant, "rule", 0, "{}", 0)
            .await
            .unwrap();
        let progress = RuleProgress {
            rule_id: "rule".into(),
            evaluated_until: 60,
            coarse: "[]".into(),
        };
        cat.set_rule_progress(tenant, &progress).await.unwrap();
    }

    let deleted = cat.delete_tenant("t", 500).await.unwrap();
    // Three samples objects, three symbol objects, one debug file.
    assert_eq!(deleted.objects, 7);
    assert!(deleted.rows >= 3 + 2 + 4 + 4, "{deleted:?}");
    let mut due = cat.due_deletions(500, 100).await.unwrap();
    due.sort();
    let mut want: Vec<String> = ["seg-1", "seg-2", "seg-3"]
        .into_iter()
        .flat_map(|s| [samples_key(s), stacks_key(s)])
        .chain(["tenants/t/debuginfo/abcd".to_string()])
        .collect();
    want.sort();
    assert_eq!(due, want);
    assert!(
        cat.due_deletions(499, 100).await.unwrap().is_empty(),
        "after the grace only"
    );

    assert!(cat.segments("t", TimeRange::ALL).await.unwrap().is_empty());
    assert!(cat.series("t", TimeRange::ALL).await.unwrap().is_empty());
    assert!(cat.label_names("t", TimeRange::ALL).await.unwrap().is_empty());
    assert!(cat.profile("t", [1; 16]).await.unwrap().is_empty());
    assert!(cat.symbol_objects("t").await.unwrap().is_empty());
    assert!(cat.settings("t").await.unwrap().is_empty());
    assert!(cat.tokens(Some("t")).await.unwrap().is_empty());
    assert!(cat.token_by_hash("sha-t").await.unwrap().is_none());
    assert!(cat.debug_files("t").await.unwrap().is_empty());
    assert!(cat.delete_requests("t").await.unwrap().is_empty());
    assert!(cat.recording_rules("t").await.unwrap().is_empty());
    assert!(cat.rule_progress("t").await.unwrap().is_empty());
    assert_eq!(cat.recording_rule_tenants().await.unwrap(), ["u"]);
    assert_eq!(cat.stats("t").await.unwrap().segments, 0);
    assert_eq!(cat.tenants().await.unwrap(), ["u"]);

    // The other tenant keeps everything, the same series id included.
    assert_eq!(cat.segments("u", TimeRange::ALL).await.unwrap().len(), 1);
    assert_eq!(cat.series("u", TimeRange::ALL).await.unwrap()[0].id, f.web.id);
    assert_eq!(cat.settings("u").await.unwrap().len(), 1);
    assert!(cat.token_by_hash("sha-u").await.unwrap().is_some());
    assert_eq!(cat.debug_files("u").await.unwrap().len(), 1);
    assert_eq!(cat.delete_requests("u").await.unwrap().len(), 1);
    assert_eq!(cat.recording_rules("u").await.unwrap().len(), 1);
    assert_eq!(cat.rule_progress("u").await.unwrap().len(), 1);

    // Deleting it again finds nothing; a tenant can start over under the same name, by a
    // writer that listed its (no) symbols after the deletion.
    assert_eq!(cat.delete_tenant("t", 600).await.unwrap().rows, 0);
    let mut again = commit("t", "seg-new", &[(&f.web, 5, 6)]);
    again.symbol_epoch = cat.symbol_epoch("t").await.unwrap().epoch;
    assert!(again.symbol_epoch > 0, "the deletion moved the symbol epoch");
    cat.commit_segment(&again).await.unwrap();
    assert_eq!(cat.segments("t", TimeRange::ALL).await.unwrap().len(), 1);
}
