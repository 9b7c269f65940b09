//! Debug files.

use stackhouse_storage::catalog::DebugFile;

use crate::fixtures::open;

suite!(debug_files_per_tenant_by_build_id,);

async fn debug_files_per_tenant_by_build_id(url: String) {
    let file = |build_id: &str, name: &str, size: i64, at: i64| DebugFile {
        build_id: build_id.into(),
        object_key: format!("tenants/a/debuginfo/{build_id}"),
        file_name: name.into(),
        size_bytes: size,
        uploaded_at_millis: at,
    };
    {
        let cat = open(&url).await;
        assert_eq!(cat.debug_files("a").await.unwrap(), vec![]);
        assert_eq!(cat.debug_file("a", "ff02").await.unwrap(), None);
        cat.put_debug_file("a", &file("ff02", "libc.so.6.debug", 900, 10))
            .await
            .unwrap();
        cat.put_debug_file("a", &file("0a1b", "prog.debug", 50, 11))
            .await
            .unwrap();
        cat.put_debug_file("b", &file("ff02", "other tenant", 1, 12))
            .await
            .unwrap();
        // A second upload of a build id replaces the first.
        cat.put_debug_file("a", &file("ff02", "libc.debug", 1000, 20))
            .await
            .unwrap();
    }
    // Rows survive reopening the catalog.
    let cat = open(&url).await;
    assert_eq!(
        cat.debug_files("a").await.unwrap(),
        vec![
            file("0a1b", "prog.debug", 50, 11),
            file("ff02", "libc.debug", 1000, 20)
        ]
    );
    assert_eq!(
        cat.debug_file("b", "ff02").await.unwrap(),
        Some(file("ff02", "other tenant", 1, 12))
    );
    assert!(cat.delete_debug_file("a", "ff02").await.unwrap());
    assert!(!cat.delete_debug_file("a", "ff02").await.unwrap());
    assert_eq!(cat.debug_file("a", "ff02").await.unwrap(), None);
    assert_eq!(
        cat.debug_files("a").await.unwrap(),
        vec![file("0a1b", "prog.debug", 50, 11)]
    );
    // The other tenant's file of the same build id is untouched.
    assert_eq!(cat.debug_files("b").await.unwrap().len(), 1);
}
