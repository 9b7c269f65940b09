//! Tenant settings.

use stackhouse_storage::catalog::Setting;

use crate::fixtures::open;

suite!(settings_per_tenant_latest_wins,);

async fn settings_per_tenant_latest_wins(url: String) {
    let setting = |name: &str, value: &str, at: i64| Setting {
        name: name.into(),
        value: value.into(),
        modified_at_millis: at,
    };
    {
        let cat = open(&url).await;
        assert_eq!(cat.settings("a").await.unwrap(), vec![]);
        let stored = cat
            .put_setting("a", &setting("plugin", "{\"v\":1}", 10))
            .await
            .unwrap();
        assert_eq!(stored, setting("plugin", "{\"v\":1}", 10));
        cat.put_setting("a", &setting("alpha", "x", 5)).await.unwrap();
        cat.put_setting("b", &setting("plugin", "other tenant", 99))
            .await
            .unwrap();
        // A write older than the stored one loses and is told what is stored.
        let kept = cat
            .put_setting("a", &setting("plugin", "stale", 9))
            .await
            .unwrap();
        assert_eq!(kept, setting("plugin", "{\"v\":1}", 10));
        let newer = cat
            .put_setting("a", &setting("plugin", "{\"v\":2}", 11))
            .await
            .unwrap();
        assert_eq!(newer.value, "{\"v\":2}");
    }
    // Settings survive reopening the catalog.
    let cat = open(&url).await;
    assert_eq!(
        cat.settings("a").await.unwrap(),
        vec![setting("alpha", "x", 5), setting("plugin", "{\"v\":2}", 11)]
    );
    cat.delete_setting("a", "alpha").await.unwrap();
    cat.delete_setting("a", "never there").await.unwrap();
    assert_eq!(
        cat.settings("a").await.unwrap(),
        vec![setting("plugin", "{\"v\":2}", 11)]
    );
    assert_eq!(
        cat.settings("b").await.unwrap(),
        vec![setting("plugin", "other tenant", 99)]
    );
}
