//! Access tokens.

use stackhouse_storage::catalog::TenantToken;

use crate::fixtures::open;

suite!(tokens_by_hash_list_and_revoke,);

async fn tokens_by_hash_list_and_revoke(url: String) {
    let token = |id: &str, tenant: &str, at: i64| TenantToken {
        id: id.into(),
        tenant: tenant.into(),
        name: format!("{id} of {tenant}"),
        created_at_millis: at,
        revoked_at_millis: None,
        admin: id == "t2",
        // The grants round-trip as stored.
        reads: if id == "t1" { "b|c".into() } else { String::new() },
    };
    {
        let cat = open(&url).await;
        assert_eq!(cat.tokens(None).await.unwrap(), vec![]);
        cat.create_token(&token("t2", "a", 20), "hash-2").await.unwrap();
        cat.create_token(&token("t1", "a", 10), "hash-1").await.unwrap();
        cat.create_token(&token("t3", "b", 15), "hash-3").await.unwrap();
        // One secret is one token: a second row with the same hash is refused.
        assert!(cat.create_token(&token("t4", "b", 30), "hash-1").await.is_err());
    }
    // Tokens survive reopening the catalog.
    let cat = open(&url).await;
    assert_eq!(
        cat.tokens(Some("a")).await.unwrap(),
        vec![token("t1", "a", 10), token("t2", "a", 20)]
    );
    assert_eq!(
        cat.tokens(None).await.unwrap(),
        vec![token("t1", "a", 10), token("t3", "b", 15), token("t2", "a", 20)]
    );
    assert_eq!(
        cat.token_by_hash("hash-3").await.unwrap(),
        Some(token("t3", "b", 15))
    );
    assert_eq!(cat.token_by_hash("nope").await.unwrap(), None);

    assert!(cat.revoke_token("t3", 100).await.unwrap());
    assert!(
        cat.revoke_token("t3", 200).await.unwrap(),
        "revoking again succeeds"
    );
    assert!(!cat.revoke_token("missing", 100).await.unwrap());
    let revoked = TenantToken {
        revoked_at_millis: Some(100),
        ..token("t3", "b", 15)
    };
    assert_eq!(
        cat.token_by_hash("hash-3").await.unwrap(),
        Some(revoked.clone()),
        "the first revocation time"
    );
    assert_eq!(cat.tokens(Some("b")).await.unwrap(), vec![revoked]);
    assert_eq!(
        cat.token_by_hash("hash-1").await.unwrap(),
        Some(token("t1", "a", 10))
    );
}
