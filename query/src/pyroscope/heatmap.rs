//! `SelectHeatmap`: how the profiles (INDIVIDUAL) or spans (SPAN) of each time slot are
//! distributed over their totals, per `group_by` series, as Grafana's heatmap panel
//! reads it. Slots are the buckets `SelectSeries` uses, stamped with their right edge;
//! the value buckets are Pyroscope's ([`crate::heatmap`]); each non-empty
//! cell carries its largest profile or span as exemplar when `exemplar_type` asks for
//! exemplars. `limit` keeps the series with the largest totals. A heatmap needs raw
//! samples (profile and span ids): a range whose raw samples are gone is refused.

use crate::{ExemplarKind, ExemplarsQuery, StackFilter, heatmap};
use stackhouse_proto::pyroscope_querier::{HeatmapQueryType, SelectHeatmapRequest, SelectHeatmapResponse};
use stackhouse_proto::pyroscope_types::{HeatmapSeries, HeatmapSlot, LabelPair};

use super::Caller;
use super::NANOS_PER_MILLI;
use super::exemplars::{self, step_nanos};
use super::querier::series_scope;
use crate::engine::QueryEngine;
use crate::error::QueryError;

pub async fn select_heatmap(
    engine: &QueryEngine,
    call: &Caller,
    r: SelectHeatmapRequest,
) -> Result<SelectHeatmapResponse, QueryError> {
    engine
        .bounded("exemplars", async move {
            let step = step_nanos(r.step)?;
            let kind = match HeatmapQueryType::try_from(r.query_type) {
                Ok(HeatmapQueryType::Unspecified | HeatmapQueryType::Individual) => ExemplarKind::Profile,
                Ok(HeatmapQueryType::Span) => ExemplarKind::Span,
                Err(_) => {
                    return Err(QueryError::bad_request(format!(
                        "unknown heatmap query_type {}",
                        r.query_type
                    )));
                }
            };
            let limit = match r.limit {
                Some(l) if l < 0 => {
                    return Err(QueryError::bad_request(format!(
                        "limit must not be negative, got {l}"
                    )));
                }
                Some(l) if l > 0 => Some(usize::try_from(l).unwrap_or(usize::MAX)),
                _ => None,
            };
            let (scope, group_by) = series_scope(
                engine,
                call,
                &r.profile_type_id,
                &r.label_selector,
                (r.start, r.end),
                &r.group_by,
            )
            .await?;
            let query = ExemplarsQuery {
                scope,
                step_nanos: step,
                group_by,
                kind,
            };
            let found = engine.exemplars(&query, &StackFilter::default()).await?;
            let map = heatmap(&found, limit);
            let with_exemplars = exemplars::kind(r.exemplar_type).is_some();
            let y_min: Vec<f64> = map.y_min.iter().map(|&y| y as f64).collect();
            let series = map
                .series
                .into_iter()
                .map(|g| HeatmapSeries {
                    labels: r
                        .group_by
                        .iter()
                        .zip(g.group)
                        .filter(|(_, value)| !value.is_empty())
                        .map(|(name, value)| LabelPair {
                            name: name.clone(),
                            value,
                        })
                        .collect(),
                    slots: g
                        .slots
                        .into_iter()
                        .map(|slot| HeatmapSlot {
                            timestamp: (slot.bucket_start + step) / NANOS_PER_MILLI,
                            y_min: y_min.clone(),
                            counts: slot.counts,
                            exemplars: if with_exemplars {
                                slot.exemplars
                                    .iter()
                                    .map(|e| exemplars::to_wire(e, &found, &r.group_by, call.utf8_names))
                                    .collect()
                            } else {
                                Vec::new()
                            },
                        })
                        .collect(),
                })
                .collect();
            Ok(SelectHeatmapResponse { series })
        })
        .await
}
