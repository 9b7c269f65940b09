//! `GET /api/v1/diff`.

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use stackhouse_query::render::flamebearer::flamebearer_diff;
use stackhouse_query::render::folded_diff;
use stackhouse_query::{DiffQuery, PprofQuery};

use super::params::{DiffParams, Format, QueryMap, TenantHeader, TreeParams, tenant_of};
use super::{AppState, DiffBody, folded, json, pprof};
use crate::error::ApiError;

/// Two selections of one profile type merged into one tree carrying both sides' values.
#[utoipa::path(
    get,
    path = "/api/v1/diff",
    tag = "query",
    params(TenantHeader, DiffParams, TreeParams),
    responses(
        (status = 200, description = "The diff in the requested format (folded: `a;b;c BASELINE COMPARISON`; pprof: sample types `baseline` and `comparison`)", content(
            (DiffBody = "application/json"),
            (String = "text/plain"),
            ("application/octet-stream"),
        )),
    )
)]
pub async fn diff(
    State(state): State<AppState>,
    headers: HeaderMap,
    q: QueryMap,
) -> Result<Response, ApiError> {
    let tenant = tenant_of(&headers)?;
    let sides = DiffParams::from_query(&q)?;
    let tree = TreeParams::from_query(&q)?;

    let max_nodes = tree.max_nodes(&state.engine)?;
    let format = tree.format()?;
    let (baseline, comparison) = sides.scopes(&state, &tenant).await?;
    let engine = &state.engine;
    let run = |baseline, comparison| async move {
        let query = DiffQuery {
            baseline,
            comparison,
            max_nodes,
            baseline_stacks: Default::default(),
            comparison_stacks: Default::default(),
        };
        engine.diff(&query).await
    };
    Ok(match format {
        Format::Pprof => return pprof(&state, &PprofQuery::Diff { baseline, comparison }).await,
        Format::Json => json(DiffBody::Diff(Box::new(run(baseline, comparison).await?))),
        Format::Folded => folded(folded_diff(&run(baseline, comparison).await?)),
        Format::Flamebearer => json(DiffBody::Flamebearer(flamebearer_diff(
            &run(baseline, comparison).await?,
        ))),
    })
}
