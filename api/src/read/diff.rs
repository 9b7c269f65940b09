//! `GET /api/v1/diff`.

use axum::extract::State;
use axum::response::Response;
use stackhouse_query::endpoints;
use stackhouse_query::request::TreeAnswer;

use super::call::ReadCall;
use super::connect::querier;
use super::encode::{DiffBody, json, pprof, rendered};
use super::params::{DiffParams, FrameParams, TenantHeader, TreeParams};
use crate::error::ApiError;
use crate::route::{Route, documented};
use crate::state::AppState;

pub(super) fn routes() -> Vec<Route> {
    vec![documented!(diff), querier!("Diff", endpoints::diff::diff)]
}

/// Two selections of one profile type merged into one tree carrying both sides' values.
#[utoipa::path(
    get,
    path = "/api/v1/diff",
    tag = "query",
    params(TenantHeader, DiffParams, TreeParams, FrameParams),
    responses(
        (status = 200, description = "The diff in the requested format (folded: `a;b;c BASELINE COMPARISON`; pprof: sample types `baseline` and `comparison`)", content(
            (DiffBody = "application/json"),
            (String = "text/plain"),
            ("application/octet-stream"),
        )),
    )
)]
pub(crate) async fn diff(
    State(state): State<AppState>,
    ReadCall { tenant, q }: ReadCall,
) -> Result<Response, ApiError> {
    let sides = DiffParams::from_query(&q)?;
    let tree = TreeParams::from_query(&q)?;
    let format = tree.format()?;
    let frames = FrameParams::from_query(&q)?;
    let request = sides.request(tenant, tree.asked_max_nodes()?, tree.output()?, frames);
    Ok(match state.engine.read_diff(&request).await? {
        TreeAnswer::Pprof(profile) => pprof(&profile),
        TreeAnswer::Json(diff) => json(DiffBody::Diff(Box::new(diff))),
        TreeAnswer::Tree(diff) => rendered(format, |r| r.diff(&diff))?,
    })
}
