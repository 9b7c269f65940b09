//! The series limit: the series ids each tenant has, counted against its
//! `--ingest-max-series`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stackhouse_storage::catalog::{CatalogError, SeriesCatalog};
use stackhouse_storage::model::Series;

use crate::otlp::{AnySeries, SeriesAdmission};

/// How long a tenant's series ids are trusted before the catalog is read again: series
/// that retention deleted free their place, and series other ingesters added count.
const RELOAD_AFTER: Duration = Duration::from_secs(300);

/// The series ids each tenant has, read from the catalog once and then kept up to date
/// with what this process admits. With several ingesters the count is each one's view:
/// a tenant may go over its limit by what the others added since the last reload.
pub struct SeriesCounter {
    catalog: Arc<dyn SeriesCatalog>,
    tenants: Mutex<HashMap<String, Arc<Mutex<Known>>>>,
}

struct Known {
    ids: HashSet<i64>,
    loaded: Instant,
    /// To be read again at the next request, whatever its age.
    stale: bool,
}

impl SeriesCounter {
    pub fn new(catalog: Arc<dyn SeriesCatalog>) -> SeriesCounter {
        SeriesCounter {
            catalog,
            tenants: Mutex::new(HashMap::new()),
        }
    }

    /// The admission of `tenant`'s series under `max` (`0`: no limit).
    pub async fn gate(
        &self,
        tenant: &str,
        max: usize,
    ) -> Result<Box<dyn SeriesAdmission + Send>, CatalogError> {
        if max == 0 {
            return Ok(Box::new(AnySeries));
        }
        let known = self.tenants.lock().expect("series lock").get(tenant).cloned();
        let known = match known {
            None => self.load(tenant).await?,
            Some(known) if self.due(&known) => match self.load(tenant).await {
                Ok(reloaded) => reloaded,
                Err(e) => {
                    // The ids read before still bound the tenant; the next reload is due
                    // in RELOAD_AFTER.
                    tracing::warn!(%tenant, error = %e, "reloading the series count failed");
                    known
                }
            },
            Some(known) => known,
        };
        Ok(Box::new(Gate {
            known,
            max,
            tenant: tenant.to_string(),
        }))
    }

    /// The catalog refused `ids` at commit: other ingesters took the places this count
    /// thought free. They are no longer counted as the tenant's, and the next request reads
    /// the tenant's series again, so this gate refuses them up front from then on.
    pub fn refused_at_commit(&self, tenant: &str, ids: &[i64]) {
        let known = self.tenants.lock().expect("series lock").get(tenant).cloned();
        if let Some(known) = known {
            let mut known = known.lock().expect("series lock");
            for id in ids {
                known.ids.remove(id);
            }
            known.stale = true;
        }
    }

    /// Whether `known` is stale; the caller that finds it so reloads it, the others keep
    /// counting with it meanwhile.
    fn due(&self, known: &Mutex<Known>) -> bool {
        let mut known = known.lock().expect("series lock");
        let due = known.stale || known.loaded.elapsed() >= RELOAD_AFTER;
        if due {
            known.loaded = Instant::now();
            known.stale = false;
        }
        due
    }

    /// Reads the tenant's series ids, holding no lock meanwhile: a slow catalog holds up no
    /// other tenant's requests.
    async fn load(&self, tenant: &str) -> Result<Arc<Mutex<Known>>, CatalogError> {
        let ids: HashSet<i64> = self.catalog.live_series(tenant).await?.into_iter().collect();
        let mut tenants = self.tenants.lock().expect("series lock");
        let known = tenants.entry(tenant.to_string()).or_insert_with(|| {
            Arc::new(Mutex::new(Known {
                ids: HashSet::new(),
                loaded: Instant::now(),
                stale: false,
            }))
        });
        // In place: gates of requests under way count with the new set too.
        *known.lock().expect("series lock") = Known {
            ids,
            loaded: Instant::now(),
            stale: false,
        };
        Ok(known.clone())
    }
}

struct Gate {
    known: Arc<Mutex<Known>>,
    max: usize,
    tenant: String,
}

impl SeriesAdmission for Gate {
    fn admit(&mut self, series: &Series) -> Result<(), String> {
        let mut known = self.known.lock().expect("series lock");
        if known.ids.contains(&series.id) {
            return Ok(());
        }
        if known.ids.len() >= self.max {
            return Err(format!(
                "tenant {:?} has reached its limit of {} series (--ingest-max-series) and this \
                 profile's series {} is new",
                self.tenant,
                self.max,
                describe(series),
            ));
        }
        known.ids.insert(series.id);
        Ok(())
    }
}

/// `type{a="1", b="2"}`, for naming a refused series.
fn describe(series: &Series) -> String {
    let labels: Vec<String> = series.labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{}{{{}}}", series.profile_type.id(), labels.join(", "))
}

#[cfg(test)]
mod tests {
    use stackhouse_storage::catalog::open_catalog;
    use stackhouse_storage::model::{Labels, ProfileType};

    use super::*;

    fn series(n: usize) -> Series {
        let labels: Labels = [("service.name".to_string(), format!("s{n}"))].into();
        Series::new(
            ProfileType::parse("cpu:nanoseconds:cpu:nanoseconds").unwrap(),
            labels,
            0,
        )
    }

    #[tokio::test]
    async fn the_limit_counts_distinct_series_and_names_the_refused_one() {
        let counter = SeriesCounter::new(open_catalog("sqlite::memory:").await.unwrap());
        let mut gate = counter.gate("t", 2).await.unwrap();
        gate.admit(&series(1)).unwrap();
        gate.admit(&series(1)).unwrap();
        gate.admit(&series(2)).unwrap();
        let refused = gate.admit(&series(3)).unwrap_err();
        assert!(refused.contains("limit of 2 series"), "{refused}");
        assert!(refused.contains("service.name=\"s3\""), "{refused}");
        // Known series stay welcome, also through a later gate of the same tenant.
        let mut again = counter.gate("t", 2).await.unwrap();
        again.admit(&series(2)).unwrap();
        assert!(again.admit(&series(4)).is_err());
        // Other tenants count their own.
        counter.gate("u", 2).await.unwrap().admit(&series(3)).unwrap();
        counter.gate("t", 0).await.unwrap().admit(&series(5)).unwrap();
    }

    #[tokio::test]
    async fn a_refusal_at_commit_reads_the_catalog_again() {
        let counter = SeriesCounter::new(open_catalog("sqlite::memory:").await.unwrap());
        let mut gate = counter.gate("t", 2).await.unwrap();
        gate.admit(&series(1)).unwrap();
        gate.admit(&series(2)).unwrap();
        assert!(gate.admit(&series(3)).is_err());
        // Nothing was committed: the catalog, read again, has no series of "t".
        counter.refused_at_commit("t", &[series(2).id]);
        counter.refused_at_commit("unknown tenant", &[series(2).id]);
        let mut again = counter.gate("t", 2).await.unwrap();
        again.admit(&series(3)).unwrap();
        again.admit(&series(4)).unwrap();
        assert!(again.admit(&series(1)).is_err());
    }
}
