//! `--auth`: whether requests need a tenant token (the tokens themselves are checked by
//! the server's auth layer).

use clap::ValueEnum;

#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum AuthMode {
    /// Anyone may send and read; the tenant is `X-Scope-OrgID` (a laptop, or behind a
    /// proxy that authenticates).
    #[default]
    Off,
    /// Every request but health, metrics and the web UI's files needs a tenant token.
    Required,
}
