//! Group commit: requests hand in batches and wait; every flush interval (or size bound)
//! one segment per tenant is written, committed to the catalog, and only then is every
//! waiting request acknowledged.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{Id, JoinSet};
use tokio::time::MissedTickBehavior;

use crate::catalog::{CommitOutcome, SegmentCommit, SymbolEpoch};
use crate::clock::{self, SharedClock};
use crate::model::{AttributeSet, Batch, IdMap, ProfileKey, ProfileRecord};
use crate::segment::{WrittenSegment, write_segment};
use crate::store::Store;
use crate::symbols::{KnownSymbols, SymbolCache, SymbolIndex};

/// Requests queued towards the writer task before `write` waits for room.
const QUEUE: usize = 1024;

#[derive(Clone, Debug)]
pub struct WriterConfig {
    pub flush_interval: Duration,
    /// Flush early once this many samples wait for one tenant.
    pub max_pending_samples: usize,
    /// Memory budget of the batches accepted but not yet durable (pending and flushing),
    /// by [`Batch::estimated_bytes`]. A write that would go over it is refused at once
    /// with [`WriteError::Overloaded`]; a batch larger than the whole budget with
    /// [`WriteError::TooLarge`].
    pub max_buffered_bytes: usize,
    /// A flush (objects written and committed) that takes longer fails, and its requests
    /// get [`WriteError::Unavailable`]: with the object store or catalog unreachable,
    /// senders hear so and retry instead of waiting out every retry of the store client.
    pub flush_timeout: Duration,
    /// What segments are stamped as created at: compaction merges level-0 segments older
    /// than its `l0_max_age` by its own clock, so both must read the same one.
    pub clock: SharedClock,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            flush_interval: Duration::from_secs(1),
            max_pending_samples: 1_000_000,
            max_buffered_bytes: 512 << 20,
            flush_timeout: Duration::from_secs(30),
            clock: clock::system(),
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum WriteError {
    /// The segment could not be made durable; nothing of the request is visible and the
    /// sender should retry.
    #[error("storing the batch failed, retry: {0}")]
    Unavailable(String),
    #[error("the writer is shutting down")]
    ShuttingDown,
    /// The batches waiting to become durable fill the memory budget; nothing of the
    /// request was queued and the sender should retry after `retry_after`.
    #[error(
        "ingest memory budget of {budget} bytes is full with data not yet stored, retry in {}s",
        retry_after.as_secs_f64().ceil()
    )]
    Overloaded { retry_after: Duration, budget: usize },
    /// The batch alone is larger than the whole budget: it can never be accepted, so
    /// retrying is useless. (Refused rather than let through when nothing else is
    /// buffered, so the budget is a hard bound.)
    #[error(
        "the request needs about {bytes} bytes of ingest memory, more than the whole budget of {budget} bytes; send smaller requests"
    )]
    TooLarge { bytes: usize, budget: usize },
}

/// What an acknowledged write produced.
#[derive(Clone, Debug)]
pub struct WriteReceipt {
    /// The segment the batch went into; empty for a batch without samples, which is
    /// acknowledged without writing anything.
    pub segment_id: String,
    /// What of the request the tenant's series limit refused at commit (other ingesters
    /// took the last places since this one's own count): not stored, to be reported as
    /// rejected.
    pub refused: RefusedSeries,
    /// What of the request was stored before (a retried export) and left out:
    /// acknowledged, but neither stored again nor refused.
    pub repeated: Repeated,
    /// The bytes of the segment's objects per sample row it holds, to share a flush's
    /// size out among what it stored.
    pub bytes_per_sample: f64,
}

/// The profiles of one request left out because they were stored before, and their
/// sample rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repeated {
    pub profiles: usize,
    pub samples: usize,
    /// `samples` per series.
    pub by_series: Vec<(i64, usize)>,
}

/// The part of one request the catalog refused for the series limit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RefusedSeries {
    /// The request's series refused, sorted.
    pub series: Vec<i64>,
    pub samples: usize,
    /// The request's profiles of those series: one per distinct profile id, and one per
    /// series for samples without a profile id (one OTLP profile has one series).
    pub profiles: usize,
}

impl RefusedSeries {
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }
}

type Ack = oneshot::Sender<Result<WriteReceipt, WriteError>>;

enum Msg {
    Write(Box<Request>),
    Shutdown,
}

/// Boxed in the queue: batches are large, and the queue holds many messages.
struct Request {
    batch: Batch,
    ack: Ack,
    reservation: Reservation,
    /// The tenant's series limit, enforced at commit; 0: none.
    max_series: usize,
}

/// Bytes of the budget held by one accepted batch; given back on drop, which happens
/// after its acknowledgement is sent, or when the batch is dropped unsent.
struct Reservation {
    buffered: Arc<AtomicUsize>,
    bytes: usize,
}

impl Reservation {
    /// Takes `bytes` of `budget`, or nothing when they do not fit.
    fn take(buffered: &Arc<AtomicUsize>, bytes: usize, budget: usize) -> Option<Reservation> {
        let before = buffered
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&total| total <= budget)
            })
            .ok()?;
        pending_bytes(before + bytes);
        Some(Reservation {
            buffered: buffered.clone(),
            bytes,
        })
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let before = self.buffered.fetch_sub(self.bytes, Ordering::AcqRel);
        pending_bytes(before - self.bytes);
    }
}

/// Bytes of ingested data accepted but not yet stored, beside the budget's gauge.
fn pending_bytes(bytes: usize) {
    metrics::gauge!("stackhouse_ingest_pending_bytes").set(bytes as f64);
}

pub use crate::catalog::WriterCatalog;

pub struct Writer {
    tx: mpsc::Sender<Msg>,
    symbols: Arc<SymbolCache>,
    /// Estimated bytes of the batches accepted and not yet acknowledged; checked here,
    /// not in the writer task, so refusing costs no queueing.
    buffered: Arc<AtomicUsize>,
    budget: usize,
    retry_after: Duration,
    /// Becomes `true` when the writer task has flushed everything and stopped.
    stopped: watch::Receiver<bool>,
}

impl Writer {
    pub fn start(
        store: Store,
        catalog: Arc<dyn WriterCatalog>,
        symbols: Arc<SymbolCache>,
        config: WriterConfig,
    ) -> Writer {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (stopped_tx, stopped) = watch::channel(false);
        let budget = config.max_buffered_bytes;
        metrics::gauge!("stackhouse_ingest_budget_bytes").set(budget as f64);
        // Room comes back when a flush finishes, so retrying sooner than one interval
        // mostly meets the same full budget.
        let retry_after = config.flush_interval.max(Duration::from_secs(1));
        let flusher = Arc::new(Flusher {
            store,
            catalog,
            symbols: symbols.clone(),
            clock: config.clock.clone(),
        });
        tokio::spawn(async move {
            WriterTask::new(flusher, config).run(rx).await;
            let _ = stopped_tx.send(true);
        });
        Writer {
            tx,
            symbols,
            buffered: Arc::new(AtomicUsize::new(0)),
            budget,
            retry_after,
            stopped,
        }
    }

    /// What of `tenant` this writer knows to be committed, for normalizing requests
    /// against.
    pub fn known(&self, tenant: &str) -> Arc<KnownSymbols> {
        self.symbols.known(tenant)
    }

    /// Estimated bytes of the batches accepted but not acknowledged yet.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered.load(Ordering::Acquire)
    }

    /// Returns once `batch` is durable (objects written, catalog committed).
    ///
    /// Dropping the future before it completes does not cancel the write: the batch may
    /// still become durable, only the acknowledgement is lost.
    pub async fn write(&self, batch: Batch) -> Result<WriteReceipt, WriteError> {
        self.write_within(batch, 0).await
    }

    /// [`Self::write`] for a tenant that may have at most `max_series` series (0: no
    /// limit). The catalog counts them at commit, across every ingester; the series it
    /// refuses are not stored and are named in the receipt.
    pub async fn write_within(&self, batch: Batch, max_series: usize) -> Result<WriteReceipt, WriteError> {
        if self.tx.is_closed() {
            return Err(WriteError::ShuttingDown);
        }
        if batch.samples.is_empty() {
            return Ok(WriteReceipt {
                segment_id: String::new(),
                refused: RefusedSeries::default(),
                repeated: Repeated::default(),
                bytes_per_sample: 0.0,
            });
        }
        // A profile's rows are one run of its series: looked up once per run, not per row.
        let unknown = batch
            .samples
            .chunk_by(|a, b| a.series_id == b.series_id)
            .map(|run| &run[0])
            .find(|s| !batch.series.contains_key(&s.series_id));
        if let Some(s) = unknown {
            // Caught per request, so one bad request does not fail the whole group.
            return Err(WriteError::Unavailable(format!(
                "batch has samples of series {} but not its definition",
                s.series_id
            )));
        }
        let bytes = batch.estimated_bytes();
        if bytes > self.budget {
            return Err(WriteError::TooLarge {
                bytes,
                budget: self.budget,
            });
        }
        let reservation =
            Reservation::take(&self.buffered, bytes, self.budget).ok_or(WriteError::Overloaded {
                retry_after: self.retry_after,
                budget: self.budget,
            })?;
        let (ack, acked) = oneshot::channel();
        let request = Request {
            batch,
            ack,
            reservation,
            max_series,
        };
        self.tx
            .send(Msg::Write(Box::new(request)))
            .await
            .map_err(|_| WriteError::ShuttingDown)?;
        acked
            .await
            .unwrap_or_else(|_| Err(WriteError::Unavailable("the writer task stopped".into())))
    }

    /// Flushes and acknowledges everything pending, then refuses new writes.
    pub async fn shutdown(&self) {
        // Fails only when the task already stopped, which is what we wait for anyway.
        let _ = self.tx.send(Msg::Shutdown).await;
        let mut stopped = self.stopped.clone();
        let _ = stopped.wait_for(|stopped| *stopped).await;
    }
}

/// Requests of one tenant waiting for the next flush.
struct Pending {
    batch: Batch,
    /// The keys of `batch.profiles`, kept beside it so that each request is checked
    /// against them without hashing the whole pending batch again.
    profile_keys: HashSet<ProfileKey>,
    waiting: Vec<Waiting>,
    reservations: Vec<Reservation>,
    /// The limit the latest request brought: one tenant's requests bring the same one,
    /// unless its configuration changed meanwhile.
    max_series: usize,
}

/// A request waiting for its flush, and what it brought per series.
struct Waiting {
    ack: Ack,
    share: Share,
    /// Its profiles in the pending batch, with their sample rows, to learn which of them
    /// the flush left out as stored before.
    profiles: Vec<(ProfileKey, usize)>,
    /// Its profiles left out at once because an earlier request waiting for the same
    /// flush brought them: (series, sample rows).
    repeated_early: Vec<(i64, usize)>,
}

impl Waiting {
    /// What of this request the flush left out as repeats. A repeat of a profile whose
    /// series the limit refused counts as refused (the share counted it), not as repeated.
    fn repeated(&self, flushed: &Flushed) -> Repeated {
        let mut repeated = Repeated::default();
        let early = self
            .repeated_early
            .iter()
            .filter(|(series, _)| !flushed.refused_series.contains(series))
            .copied();
        let late = self
            .profiles
            .iter()
            .filter(|(key, _)| flushed.repeated.contains(key))
            .map(|&(key, samples)| (key.1, samples));
        for (series, samples) in early.chain(late) {
            repeated.profiles += 1;
            repeated.samples += samples;
            repeated.by_series.push((series, samples));
        }
        repeated
    }
}

fn profile_rows(profiles: &[ProfileRecord]) -> Vec<(ProfileKey, usize)> {
    profiles
        .iter()
        .map(|p| (p.key(), usize::try_from(p.sample_count).unwrap_or(0)))
        .collect()
}

/// What one request brought of each series, so it learns what of it the series limit
/// refused; empty when the tenant has no limit (nothing can be refused).
#[derive(Default)]
struct Share {
    samples: HashMap<i64, usize>,
    /// Series with samples that carry no profile id.
    anonymous: HashSet<i64>,
    profiles: HashSet<(i64, [u8; 16])>,
}

impl Share {
    fn of(batch: &Batch) -> Share {
        let mut share = Share::default();
        // A profile's rows are one run of its series: counted per run, not per row.
        for run in batch
            .samples
            .chunk_by(|a, b| a.series_id == b.series_id && a.profile_id == b.profile_id)
        {
            let series = run[0].series_id;
            *share.samples.entry(series).or_default() += run.len();
            match run[0].profile_id {
                Some(id) => share.profiles.insert((series, id)),
                None => share.anonymous.insert(series),
            };
        }
        share
    }

    fn refused(&self, refused: &HashSet<i64>) -> RefusedSeries {
        if refused.is_empty() {
            return RefusedSeries::default();
        }
        let mut series: Vec<i64> = self
            .samples
            .keys()
            .copied()
            .filter(|s| refused.contains(s))
            .collect();
        series.sort_unstable();
        let samples = series.iter().map(|s| self.samples[s]).sum();
        let profiles = self.profiles.iter().filter(|(s, _)| refused.contains(s)).count()
            + self.anonymous.iter().filter(|s| refused.contains(s)).count();
        RefusedSeries {
            series,
            samples,
            profiles,
        }
    }
}

/// The single task that owns all pending state; flushes run as tasks it spawns, at most
/// one per tenant at a time, so tenants never wait for (or fail with) each other.
struct WriterTask {
    flusher: Arc<Flusher>,
    config: WriterConfig,
    pending: HashMap<String, Pending>,
    flushing: HashMap<Id, String>,
    tasks: JoinSet<()>,
}

impl WriterTask {
    fn new(flusher: Arc<Flusher>, config: WriterConfig) -> WriterTask {
        WriterTask {
            flusher,
            config,
            pending: HashMap::new(),
            flushing: HashMap::new(),
            tasks: JoinSet::new(),
        }
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        // The first tick one period out: `interval` fires at once, which would flush the
        // first requests alone instead of grouping them.
        let period = self.config.flush_interval;
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut open = true;
        loop {
            if !open {
                self.flush_all();
                if self.tasks.is_empty() {
                    return;
                }
            }
            tokio::select! {
                msg = rx.recv(), if open => match msg {
                    Some(Msg::Write(request)) => self.add(*request),
                    Some(Msg::Shutdown) | None => {
                        // Refuse new requests, but keep those already queued.
                        rx.close();
                        while let Some(msg) = rx.recv().await {
                            if let Msg::Write(request) = msg {
                                self.add(*request);
                            }
                        }
                        open = false;
                    }
                },
                _ = tick.tick() => self.flush_all(),
                Some(done) = self.tasks.join_next_with_id() => {
                    let id = match done {
                        Ok((id, ())) => id,
                        Err(e) => {
                            // The acks moved into the task were dropped, so its requests
                            // already got `Unavailable`.
                            tracing::error!(error = %e, "segment flush task failed");
                            e.id()
                        }
                    };
                    if let Some(tenant) = self.flushing.remove(&id) {
                        self.flush_if_full(&tenant);
                    }
                }
            }
        }
    }

    fn add(&mut self, request: Request) {
        let Request {
            mut batch,
            ack,
            reservation,
            max_series,
        } = request;
        let tenant = batch.tenant.clone();
        // Before repeats are left out below: a repeat whose first copy is refused is
        // refused too.
        let share = if max_series == 0 {
            Share::default()
        } else {
            Share::of(&batch)
        };
        let mut waiting = Waiting {
            ack,
            share,
            profiles: Vec::new(),
            repeated_early: Vec::new(),
        };
        match self.pending.get_mut(&tenant) {
            Some(pending) => {
                // A retry that arrives while its first attempt still waits here.
                let repeats: HashSet<ProfileKey> = batch
                    .profiles
                    .iter()
                    .map(ProfileRecord::key)
                    .filter(|k| pending.profile_keys.contains(k))
                    .collect();
                waiting.repeated_early = batch
                    .profiles
                    .iter()
                    .filter(|p| repeats.contains(&p.key()))
                    .map(|p| (p.series_id, usize::try_from(p.sample_count).unwrap_or(0)))
                    .collect();
                batch.remove_profiles(&repeats);
                waiting.profiles = profile_rows(&batch.profiles);
                pending
                    .profile_keys
                    .extend(batch.profiles.iter().map(ProfileRecord::key));
                pending.batch.merge(batch);
                pending.waiting.push(waiting);
                pending.reservations.push(reservation);
                pending.max_series = max_series;
            }
            None => {
                waiting.profiles = profile_rows(&batch.profiles);
                let profile_keys = batch.profiles.iter().map(ProfileRecord::key).collect();
                self.pending.insert(
                    tenant.clone(),
                    Pending {
                        batch,
                        profile_keys,
                        waiting: vec![waiting],
                        reservations: vec![reservation],
                        max_series,
                    },
                );
            }
        }
        self.flush_if_full(&tenant);
    }

    fn flush_if_full(&mut self, tenant: &str) {
        let full = self
            .pending
            .get(tenant)
            .is_some_and(|p| p.batch.samples.len() >= self.config.max_pending_samples);
        if full {
            self.start_flush(tenant);
        }
    }

    fn flush_all(&mut self) {
        let tenants: Vec<String> = self.pending.keys().cloned().collect();
        for tenant in tenants {
            self.start_flush(&tenant);
        }
    }

    /// Starts flushing what `tenant` has pending, unless one of its flushes is running:
    /// segments of a tenant are written one after the other, so each flush sees the
    /// symbols the previous one stored.
    fn start_flush(&mut self, tenant: &str) {
        if self.flushing.values().any(|t| t == tenant) {
            return;
        }
        let Some(Pending {
            batch,
            waiting,
            reservations,
            max_series,
            ..
        }) = self.pending.remove(tenant)
        else {
            return;
        };
        let flusher = self.flusher.clone();
        let timeout = self.config.flush_timeout;
        let tenant_name = tenant.to_string();
        let handle = self.tasks.spawn(async move {
            let started = std::time::Instant::now();
            // Dropping a flush midway leaves at most objects no commit names (the cleanup
            // deletes them) or a commit whose answer was lost (retries are deduplicated by
            // profile id); nothing acknowledged depends on it.
            let result = tokio::time::timeout(timeout, flusher.flush(batch, max_series))
                .await
                .unwrap_or_else(|_| {
                    Err(FlushError {
                        tenant: tenant_name,
                        message: format!(
                            "the object store or catalog did not answer within the flush timeout of {timeout:?}"
                        ),
                    })
                });
            let outcome = if result.is_ok() { "ok" } else { "error" };
            metrics::histogram!("stackhouse_flush_duration_seconds", "outcome" => outcome)
                .record(started.elapsed().as_secs_f64());
            let result = result.map_err(|e| {
                tracing::warn!(tenant = %e.tenant, error = %e.message, "segment flush failed");
                WriteError::Unavailable(e.message)
            });
            for request in waiting {
                let answer = result.as_ref().map_err(Clone::clone).map(|flushed| {
                    let repeated = request.repeated(flushed);
                    // Counted once a request is acknowledged: a failed flush's requests are
                    // sent again and would count their repeats twice.
                    metrics::counter!("stackhouse_ingest_repeated_profiles_total")
                        .increment(repeated.profiles as u64);
                    WriteReceipt {
                        segment_id: flushed.segment_id.clone(),
                        refused: request.share.refused(&flushed.refused_series),
                        repeated,
                        bytes_per_sample: flushed.bytes_per_sample,
                    }
                });
                // A requester that gave up no longer listens; nothing to do for it.
                let _ = request.ack.send(answer);
            }
            // Only now: the flushed batch is dropped and every request has its answer.
            drop(reservations);
        });
        self.flushing.insert(handle.id(), tenant.to_string());
    }
}

struct FlushError {
    tenant: String,
    message: String,
}

struct Flusher {
    store: Store,
    catalog: Arc<dyn WriterCatalog>,
    symbols: Arc<SymbolCache>,
    clock: SharedClock,
}

/// What a flush stored.
struct Flushed {
    /// Empty when nothing was left to store.
    segment_id: String,
    /// Series the catalog refused for the tenant's series limit; none of their samples
    /// were stored.
    refused_series: HashSet<i64>,
    /// Profiles left out because they were stored before.
    repeated: HashSet<ProfileKey>,
    /// The segment's objects' bytes per stored sample row (0 without a segment).
    bytes_per_sample: f64,
}

impl Flusher {
    /// Writes one segment of `batch` with only the symbols not stored yet, commits it, and
    /// remembers its symbols. The commit is the arbiter between ingesters: when it refuses
    /// profiles another ingester stored first or series over the tenant's limit, they are
    /// taken out and the rest is written and committed again (each round takes something
    /// out, so this ends). The objects of a refused attempt are named by no commit; the
    /// cleanup's orphan sweep deletes them.
    async fn flush(&self, mut batch: Batch, max_series: usize) -> Result<Flushed, FlushError> {
        let tenant = batch.tenant.clone();
        let fail = |message: String| FlushError {
            tenant: tenant.clone(),
            message,
        };
        // A retried export whose first attempt was stored (and its answer lost) is left
        // out before anything is written; the commit below catches the ones that race.
        let keys: Vec<ProfileKey> = batch.profiles.iter().map(ProfileRecord::key).collect();
        let stored = self
            .catalog
            .stored_profiles(&tenant, &keys)
            .await
            .map_err(|e| fail(format!("looking up profile ids: {e}")))?;
        let mut repeated = leave_out_repeated(&mut batch, &stored);
        let mut refused_series = HashSet::new();
        // Before `retain_new`: the labels come from every set used, stored before or not.
        let mut sample_labels = sample_labels(&batch, None);
        let (mut symbol_epoch, mut taken) = self.leave_out_stored(&mut batch).await.map_err(fail)?;
        loop {
            if batch.samples.is_empty() {
                return Ok(Flushed {
                    segment_id: String::new(),
                    refused_series,
                    repeated,
                    bytes_per_sample: 0.0,
                });
            }
            let segment_id = uuid::Uuid::now_v7().to_string();
            let created_at = self.clock.now_nanos();
            let WrittenSegment { segment, symbols } =
                write_segment(&self.store, &batch, &segment_id, 0, created_at)
                    .await
                    .map_err(|e| fail(format!("writing segment: {e}")))?;
            let bytes = segment.objects.iter().map(|o| o.size_bytes as f64).sum::<f64>();
            metrics::histogram!("stackhouse_segment_bytes").record(bytes);
            let bytes_per_sample = bytes / batch.samples.len() as f64;
            let series = segment
                .series
                .iter()
                .filter_map(|s| batch.series.get(&s.series_id).cloned())
                .collect();
            let commit = SegmentCommit {
                segment,
                symbols,
                series,
                sample_labels,
                profiles: std::mem::take(&mut batch.profiles),
                symbol_epoch,
            };
            let refusal = match self
                .catalog
                .commit_segment_within(&commit, max_series)
                .await
                .map_err(|e| fail(format!("committing segment: {e}")))?
            {
                CommitOutcome::Committed => {
                    self.symbols.record(&tenant, &commit.symbols, &mut batch).await;
                    return Ok(Flushed {
                        segment_id,
                        refused_series,
                        repeated,
                        bytes_per_sample,
                    });
                }
                CommitOutcome::Refused(refusal) => refusal,
            };
            batch.profiles = commit.profiles;
            sample_labels = commit.sample_labels;
            if refusal.stale_symbols {
                // What was left out as stored may be gone: bring it again, and decide anew.
                std::mem::take(&mut taken).move_into(&mut batch);
                (symbol_epoch, taken) = self.leave_out_stored(&mut batch).await.map_err(fail)?;
                continue;
            }
            repeated.extend(leave_out_repeated(&mut batch, &refusal.repeated));
            if !refusal.refused_series.is_empty() {
                let refused: HashSet<i64> = refusal.refused_series.iter().copied().collect();
                let samples = batch.remove_series(&refused);
                metrics::counter!("stackhouse_ingest_refused_series_samples_total").increment(samples as u64);
                tracing::debug!(%tenant, series = refused.len(), samples, "series over the limit were refused at commit");
                refused_series.extend(refused);
            }
            // The sets `retain_new` took out are in the tenant's index: the labels of what
            // is left, without those of what was taken out.
            let index = self
                .symbols
                .read(&tenant)
                .await
                .map_err(|e| fail(format!("loading symbols: {e}")))?;
            sample_labels = self::sample_labels(&batch, Some(&index.attr_sets));
        }
    }

    /// Takes out of `batch` the symbols the tenant stores as this writer's index lists
    /// them, and returns the symbol epoch the commit must be made at with what it took out.
    /// While a collection of unused symbols is under way, or when the batch's known-symbol
    /// lookups are older than the index, every symbol the batch uses is brought instead.
    async fn leave_out_stored(&self, batch: &mut Batch) -> Result<(i64, SymbolIndex), String> {
        let (index, epoch) = self
            .symbols
            .read_for_write(&batch.tenant)
            .await
            .map_err(|e| format!("loading symbols: {e}"))?;
        let collecting = SymbolEpoch::collecting_at(epoch);
        let generation = self.symbols.known(&batch.tenant).generation();
        if collecting || batch.known_generation.is_some_and(|g| g != generation) {
            index.complete(batch).map_err(|e| {
                format!("{e}: it was found as stored before its symbols were collected; sending the request again brings it")
            })?;
        }
        if collecting {
            return Ok((epoch, SymbolIndex::default()));
        }
        let taken = index.retain_new(batch);
        Ok((epoch, taken))
    }
}

/// Takes the profiles of `repeated` (stored before, by this ingester or another) out of
/// `batch`, and returns the keys it took out.
fn leave_out_repeated(batch: &mut Batch, repeated: &[ProfileKey]) -> HashSet<ProfileKey> {
    if repeated.is_empty() {
        return HashSet::new();
    }
    let repeated: HashSet<ProfileKey> = repeated.iter().copied().collect();
    let mut left_out = batch.remove_profiles(&repeated);
    // A repeated profile sharing id and series with one that is not keeps its samples
    // (they cannot be told apart), but not its record, so the next commit cannot meet
    // its key again.
    let before = batch.profiles.len();
    batch.profiles.retain(|p| !repeated.contains(&p.key()));
    left_out += before - batch.profiles.len();
    tracing::debug!(tenant = %batch.tenant, repeated = left_out, "profiles stored before were left out");
    repeated
}

/// Distinct `(key, value)` pairs of the attribute sets the samples use, looked up in the
/// batch and then in `stored` (the sets `retain_new` took out of it).
fn sample_labels(batch: &Batch, stored: Option<&IdMap<AttributeSet>>) -> Vec<(String, String)> {
    // Once per sample: SipHash over a 16-byte id would cost as much as a row's encoding.
    let used: HashSet<_, foldhash::fast::RandomState> = batch
        .samples
        .iter()
        .map(|s| s.attr_set_id)
        .filter(|id| !id.is_zero())
        .collect();
    let labels: BTreeSet<&(String, String)> = used
        .iter()
        .filter_map(|id| batch.attr_sets.get(id).or_else(|| stored?.get(id)))
        .flat_map(|set| &set.attrs)
        .collect();
    labels.into_iter().cloned().collect()
}
