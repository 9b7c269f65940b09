//! One stored profile, found by its id: the catalog says where it is and what it is; the
//! scan then reads only those segments, filtered by the id. The query API reads it as
//! `GET /api/v1/profiles/{id}`.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use stackhouse_storage::model::{ProfileType, TimeRange, member_tenants};
use utoipa::ToSchema;

use crate::endpoints::export::PprofQuery;
use crate::endpoints::flamegraph::FlamegraphQuery;
use crate::engine::QueryEngine;
use crate::engine::deleted::Deleted;
use crate::engine::scope::Scope;
use crate::error::QueryError;
use crate::frames::FrameRequest;
use crate::request::{TreeAnswer, TreeOutput, hex_id, parse_profile_type};
use crate::tree::Flamegraph;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct ProfileMeta {
    /// Hex.
    pub profile_id: String,
    pub profile_type: String,
    /// Unix nanoseconds.
    pub start: i64,
    pub end: i64,
    pub duration_nanos: i64,
    pub sample_count: i64,
    /// Resource, scope and profile attributes together (the series labels).
    pub labels: BTreeMap<String, String>,
    /// The resource attributes alone.
    pub resource: BTreeMap<String, String>,
    /// The profile's own attributes alone.
    pub attributes: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct ProfileDetail {
    #[serde(flatten)]
    pub meta: ProfileMeta,
    pub flamegraph: Flamegraph,
}

impl QueryEngine {
    /// Locates a stored profile: its metadata, and the scope that selects exactly its
    /// samples. `profile_type` picks one when the id was sent with several types;
    /// without it, such an id is an [`QueryError::InvalidArgument`] naming the types.
    /// An unknown id is [`QueryError::NotFound`].
    pub async fn find_profile(
        &self,
        tenant: &str,
        profile_id: [u8; 16],
        profile_type: Option<&ProfileType>,
    ) -> Result<(ProfileMeta, Scope), QueryError> {
        self.bounded("profile", async {
            // Of a read over several tenants, the first tenant that holds the id answers.
            let mut not_found = None;
            for member in member_tenants(tenant) {
                match self.locate_profile(member, profile_id, profile_type).await {
                    Err(QueryError::NotFound(message)) => not_found = Some(QueryError::NotFound(message)),
                    found => return found,
                }
            }
            Err(not_found.expect("a tenant string names a tenant"))
        })
        .await
    }

    async fn locate_profile(
        &self,
        tenant: &str,
        profile_id: [u8; 16],
        profile_type: Option<&ProfileType>,
    ) -> Result<(ProfileMeta, Scope), QueryError> {
        let id_hex = hex::encode(profile_id);
        let records = self.catalog.profile(tenant, profile_id).await?;
        if records.is_empty() {
            return Err(QueryError::NotFound(format!("profile {id_hex} not found")));
        }
        // The records name series ids; their types and labels come from the series.
        let series: BTreeMap<i64, _> = self
            .catalog
            .series(tenant, TimeRange::ALL)
            .await?
            .into_iter()
            .map(|s| (s.id, s))
            .collect();
        let requests = self.catalog.delete_requests(tenant).await?;
        let mut by_type: BTreeMap<ProfileType, Vec<_>> = BTreeMap::new();
        for (segment_id, record) in records {
            let Some(s) = series.get(&record.series_id) else {
                return Err(QueryError::Internal(format!(
                    "profile {id_hex} names series {} the catalog does not hold",
                    record.series_id
                )));
            };
            // A profile a deletion request hides whole is not found, its labels included.
            // It covers `[time, time + duration)`, at least its start.
            let span = TimeRange {
                start: record.start_nanos,
                end: record.end_nanos.max(record.start_nanos.saturating_add(1)),
            };
            if Deleted::of(&requests, std::slice::from_ref(s), span)?
                .whole
                .contains(&s.id)
            {
                continue;
            }
            by_type
                .entry(s.profile_type.clone())
                .or_default()
                .push((segment_id, record));
        }
        if by_type.is_empty() {
            return Err(QueryError::NotFound(format!("profile {id_hex} not found")));
        }
        let (profile_type, records) = match profile_type {
            Some(wanted) => {
                let records = by_type.remove(wanted).ok_or_else(|| {
                    QueryError::NotFound(format!(
                        "profile {id_hex} has no samples of type {}; it has {}",
                        wanted.id(),
                        type_list(by_type.keys())
                    ))
                })?;
                (wanted.clone(), records)
            }
            None if by_type.len() == 1 => by_type.pop_first().expect("one type"),
            None => {
                return Err(QueryError::InvalidArgument(format!(
                    "profile {id_hex} holds several profile types ({}); pass profile_type",
                    type_list(by_type.keys())
                )));
            }
        };
        let first = &records[0].1;
        let labels = series
            .get(&first.series_id)
            .map(|s| s.labels.clone())
            .unwrap_or_default();
        let start = records.iter().map(|(_, r)| r.start_nanos).min().unwrap_or(0);
        let end = records.iter().map(|(_, r)| r.end_nanos).max().unwrap_or(start);
        let meta = ProfileMeta {
            profile_id: id_hex,
            profile_type: profile_type.id(),
            start,
            end,
            duration_nanos: end.saturating_sub(start),
            sample_count: records.iter().map(|(_, r)| r.sample_count).sum(),
            labels,
            resource: first.resource.clone(),
            attributes: first.attributes.clone(),
        };
        let mut scope = Scope::new(tenant, profile_type, TimeRange::ALL);
        scope.profile_ids = vec![profile_id];
        let mut segments: Vec<String> = records.into_iter().map(|(segment, _)| segment).collect();
        segments.sort();
        segments.dedup();
        scope.segments = Some(segments);
        Ok((meta, scope))
    }
}

fn type_list<'a>(types: impl Iterator<Item = &'a ProfileType>) -> String {
    let ids: Vec<String> = types.map(ProfileType::id).collect();
    if ids.is_empty() {
        "none".to_string()
    } else {
        ids.join(", ")
    }
}

/// A stored profile by its id.
#[derive(Clone, Debug)]
pub struct ProfileRequest {
    pub tenant: String,
    /// Hex, 32 characters.
    pub profile_id: String,
    /// Which of the profile's types, when it was sent with several.
    pub profile_type: Option<String>,
    pub max_nodes: usize,
    pub output: TreeOutput,
    /// Frame rules and granularity.
    pub frames: FrameRequest,
}

impl QueryEngine {
    /// `GET /api/v1/profiles/{id}`: its metadata with its flamegraph (`Json`), the tree, or
    /// its samples as pprof.
    pub async fn read_profile(
        &self,
        r: &ProfileRequest,
    ) -> Result<TreeAnswer<ProfileDetail, Flamegraph>, QueryError> {
        self.bounded("profile", async {
            let profile_id = hex_id::<16>("profile_id", &r.profile_id)?;
            let profile_type = r.profile_type.as_deref().map(parse_profile_type).transpose()?;
            let max_nodes = self.max_nodes(r.max_nodes)?;
            let frames = Arc::new(r.frames.resolve()?);
            let (meta, mut scope) = self
                .find_profile(&r.tenant, profile_id, profile_type.as_ref())
                .await?;
            scope.frames = frames;
            if r.output == TreeOutput::Pprof {
                return Ok(TreeAnswer::Pprof(self.pprof(&PprofQuery::Scope(scope)).await?));
            }
            let query = FlamegraphQuery {
                scope,
                group_by: Vec::new(),
                max_nodes,
            };
            let flamegraph = self.flamegraph(&query).await?;
            Ok(match r.output {
                TreeOutput::Json => TreeAnswer::Json(ProfileDetail { meta, flamegraph }),
                _ => TreeAnswer::Tree(flamegraph),
            })
        })
        .await
    }
}
