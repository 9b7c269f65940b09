//! Deletion requests: committed, listed per tenant, cancelled only while pending and in
//! their period, moved through the purge's states one step at a time.

use stackhouse_storage::catalog::{Cancelled, DeleteRequest, DeleteState};

use crate::fixtures::open;

suite!(delete_requests_cancel_within_their_period_only,);

async fn delete_requests_cancel_within_their_period_only(url: String) {
    let request = |id: &str, created: i64| DeleteRequest {
        id: id.into(),
        selector: format!("{{service.name=\"{id}\"}}"),
        from_nanos: created * 1_000_000,
        to_nanos: created * 2_000_000,
        created_at_millis: created,
        cancel_until_millis: created + 100,
        state: DeleteState::Pending,
        matched_series: 2,
        matched_samples: created * 3,
    };
    {
        let cat = open(&url).await;
        assert_eq!(cat.delete_requests("a").await.unwrap(), vec![]);
        cat.add_delete_request("a", &request("d2", 20)).await.unwrap();
        cat.add_delete_request("a", &request("d1", 10)).await.unwrap();
        cat.add_delete_request("b", &request("d1", 15)).await.unwrap();
        // An id is unique within its tenant.
        assert!(cat.add_delete_request("a", &request("d1", 30)).await.is_err());
    }
    // Requests survive reopening the catalog, oldest first, each tenant its own.
    let cat = open(&url).await;
    assert_eq!(
        cat.delete_requests("a").await.unwrap(),
        vec![request("d1", 10), request("d2", 20)]
    );
    assert_eq!(cat.delete_requests("b").await.unwrap(), vec![request("d1", 15)]);
    // One by id, within its tenant only.
    assert_eq!(
        cat.delete_request("a", "d2").await.unwrap(),
        Some(request("d2", 20))
    );
    assert_eq!(
        cat.delete_request("b", "d1").await.unwrap(),
        Some(request("d1", 15))
    );
    assert_eq!(cat.delete_request("b", "d2").await.unwrap(), None);

    assert_eq!(
        cat.cancel_delete_request("a", "d1", 50).await.unwrap(),
        Cancelled::Now
    );
    assert_eq!(
        cat.cancel_delete_request("a", "d1", 60).await.unwrap(),
        Cancelled::Already
    );
    // The period ends at created + 100: at that instant it is over.
    assert_eq!(
        cat.cancel_delete_request("a", "d2", 120).await.unwrap(),
        Cancelled::TooLate {
            cancel_until_millis: 120
        }
    );
    assert_eq!(
        cat.cancel_delete_request("a", "nope", 0).await.unwrap(),
        Cancelled::Unknown
    );
    // Tenant b's d1 is untouched by tenant a's cancel.
    assert_eq!(
        cat.delete_requests("b").await.unwrap()[0].state,
        DeleteState::Pending
    );

    // The purge moves a request one state at a time; a purging request cannot be cancelled.
    assert!(
        cat.move_delete_request("b", "d1", DeleteState::Pending, DeleteState::Purging)
            .await
            .unwrap()
    );
    assert!(
        !cat.move_delete_request("b", "d1", DeleteState::Pending, DeleteState::Purging)
            .await
            .unwrap(),
        "moved once only"
    );
    assert_eq!(
        cat.cancel_delete_request("b", "d1", 16).await.unwrap(),
        Cancelled::TooLate {
            cancel_until_millis: 115
        }
    );
    assert!(
        !cat.move_delete_request("a", "d1", DeleteState::Pending, DeleteState::Purging)
            .await
            .unwrap(),
        "a cancelled request is never purged"
    );
    let states: Vec<(String, DeleteState)> = cat
        .delete_requests("a")
        .await
        .unwrap()
        .into_iter()
        .chain(cat.delete_requests("b").await.unwrap())
        .map(|r| (r.id, r.state))
        .collect();
    assert_eq!(
        states,
        [
            ("d1".to_string(), DeleteState::Cancelled),
            ("d2".to_string(), DeleteState::Pending),
            ("d1".to_string(), DeleteState::Purging),
        ]
    );
}
