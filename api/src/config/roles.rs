//! `--role`: what a `serve` process does.

use clap::ValueEnum;

/// What a `serve` process does. Several processes with different roles share one catalog and
/// one object store.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, ValueEnum)]
pub enum Role {
    /// OTLP gRPC and HTTP receivers, Pyroscope ingest, the writer.
    Ingest,
    /// The query API.
    Query,
    /// Compaction, retention and cleanup in the background.
    Compactor,
    /// Everything above in one process (the default).
    All,
}

/// The roles a process runs, `all` expanded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roles {
    pub ingest: bool,
    pub query: bool,
    pub compactor: bool,
}

impl Roles {
    pub fn from_flags(roles: &[Role]) -> Roles {
        let has = |r: Role| roles.is_empty() || roles.contains(&Role::All) || roles.contains(&r);
        Roles {
            ingest: has(Role::Ingest),
            query: has(Role::Query),
            compactor: has(Role::Compactor),
        }
    }

    pub const ALL: Roles = Roles {
        ingest: true,
        query: true,
        compactor: true,
    };
}
