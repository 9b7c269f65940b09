//! Reads both catalogs run the same way: a statement of `sql`, the same binds, rows decoded
//! by `FromRow`. Only the pool type differs, so they are written once, generic over the
//! backend; each catalog's `Catalog` methods call them with its pool.

use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Pool, Type};

use super::common::{
    ObjectRow, ProfileTypeRow, SegmentRow, SegmentSeriesRow, SeriesRow, assemble_segments, sorted_distinct,
};
use super::{CatalogResult, DebugFile, SegmentMeta, Setting, TenantToken, sql};
use crate::model::{ProfileType, Series, TimeRange};

pub(crate) struct Reads<'p, DB: Database>(pub &'p Pool<DB>);

impl<DB> Reads<'_, DB>
where
    DB: Database,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> i64: Encode<'q, DB> + Type<DB>,
    DB::Arguments: IntoArguments<DB>,
    for<'r> SeriesRow: FromRow<'r, DB::Row>,
    for<'r> ProfileTypeRow: FromRow<'r, DB::Row>,
    for<'r> (String,): FromRow<'r, DB::Row>,
    for<'r> SegmentRow: FromRow<'r, DB::Row>,
    for<'r> ObjectRow: FromRow<'r, DB::Row>,
    for<'r> SegmentSeriesRow: FromRow<'r, DB::Row>,
    for<'r> Setting: FromRow<'r, DB::Row>,
    for<'r> DebugFile: FromRow<'r, DB::Row>,
    for<'r> TenantToken: FromRow<'r, DB::Row>,
    for<'r> (Option<i64>, Option<i64>): FromRow<'r, DB::Row>,
{
    /// Segments overlapping `range`, in three queries on `conn`: the caller opens the read
    /// transaction (each backend with its own isolation) so the rows agree.
    pub(crate) async fn segments(
        conn: &mut DB::Connection,
        tenant: &str,
        range: TimeRange,
    ) -> CatalogResult<Vec<SegmentMeta>> {
        let segments = sqlx::query_as::<DB, SegmentRow>(sql::SEGMENTS_IN_RANGE)
            .bind(tenant)
            .bind(range.end)
            .bind(range.start)
            .fetch_all(&mut *conn)
            .await?;
        let objects = sqlx::query_as::<DB, ObjectRow>(sql::OBJECTS_IN_RANGE)
            .bind(tenant)
            .bind(range.end)
            .bind(range.start)
            .fetch_all(&mut *conn)
            .await?;
        let series = sqlx::query_as::<DB, SegmentSeriesRow>(sql::SEGMENT_SERIES_IN_RANGE)
            .bind(tenant)
            .bind(range.end)
            .bind(range.start)
            .fetch_all(&mut *conn)
            .await?;
        assemble_segments(segments, objects, series)
    }

    /// `sql` with `$1` tenant, `$2` range end, `$3` range start and, when given, `$4` name:
    /// the binds of every `*_IN_RANGE` statement.
    async fn in_range<O>(
        &self,
        sql: &'static str,
        tenant: &str,
        range: TimeRange,
        name: Option<&str>,
    ) -> CatalogResult<Vec<O>>
    where
        O: for<'r> FromRow<'r, DB::Row> + Send + Unpin,
    {
        let mut query = sqlx::query_as::<DB, O>(sql)
            .bind(tenant)
            .bind(range.end)
            .bind(range.start);
        if let Some(name) = name {
            query = query.bind(name);
        }
        Ok(query.fetch_all(self.0).await?)
    }

    pub(crate) async fn series(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<Series>> {
        let rows: Vec<SeriesRow> = self.in_range(sql::SERIES_IN_RANGE, tenant, range, None).await?;
        rows.into_iter().map(Series::try_from).collect()
    }

    pub(crate) async fn profile_types(
        &self,
        tenant: &str,
        range: TimeRange,
    ) -> CatalogResult<Vec<ProfileType>> {
        let rows: Vec<ProfileTypeRow> = self
            .in_range(sql::PROFILE_TYPES_IN_RANGE, tenant, range, None)
            .await?;
        let mut types: Vec<ProfileType> = rows.into_iter().map(ProfileType::from).collect();
        types.sort();
        Ok(types)
    }

    pub(crate) async fn label_names(&self, tenant: &str, range: TimeRange) -> CatalogResult<Vec<String>> {
        let rows: Vec<(String,)> = self
            .in_range(sql::LABEL_NAMES_IN_RANGE, tenant, range, None)
            .await?;
        Ok(sorted_distinct(rows.into_iter().map(|(name,)| name).collect()))
    }

    pub(crate) async fn label_values(
        &self,
        tenant: &str,
        name: &str,
        range: TimeRange,
    ) -> CatalogResult<Vec<String>> {
        let rows: Vec<(String,)> = self
            .in_range(sql::LABEL_VALUES_IN_RANGE, tenant, range, Some(name))
            .await?;
        Ok(sorted_distinct(rows.into_iter().map(|(value,)| value).collect()))
    }

    pub(crate) async fn tenants(&self) -> CatalogResult<Vec<String>> {
        let rows: Vec<(String,)> = sqlx::query_as::<DB, (String,)>(sql::TENANTS)
            .fetch_all(self.0)
            .await?;
        Ok(sorted_distinct(
            rows.into_iter().map(|(tenant,)| tenant).collect(),
        ))
    }

    pub(crate) async fn ping(&self) -> CatalogResult<()> {
        sqlx::query::<DB>(sql::PING).execute(self.0).await?;
        Ok(())
    }

    pub(crate) async fn data_range(&self, tenant: &str) -> CatalogResult<Option<(i64, i64)>> {
        let (min, max) = sqlx::query_as::<DB, (Option<i64>, Option<i64>)>(sql::DATA_RANGE)
            .bind(tenant)
            .fetch_one(self.0)
            .await?;
        Ok(min.zip(max))
    }

    pub(crate) async fn settings(&self, tenant: &str) -> CatalogResult<Vec<Setting>> {
        Ok(sqlx::query_as::<DB, Setting>(sql::SETTINGS)
            .bind(tenant)
            .fetch_all(self.0)
            .await?)
    }

    // One upsert statement, then a read: the read may see a newer write that raced in,
    // which is the value a client should see anyway.
    pub(crate) async fn put_setting(&self, tenant: &str, setting: &Setting) -> CatalogResult<Setting> {
        sqlx::query::<DB>(sql::PUT_SETTING)
            .bind(tenant)
            .bind(setting.name.as_str())
            .bind(setting.value.as_str())
            .bind(setting.modified_at_millis)
            .execute(self.0)
            .await?;
        Ok(sqlx::query_as::<DB, Setting>(sql::SETTING)
            .bind(tenant)
            .bind(setting.name.as_str())
            .fetch_one(self.0)
            .await?)
    }

    pub(crate) async fn delete_setting(&self, tenant: &str, name: &str) -> CatalogResult<()> {
        sqlx::query::<DB>(sql::DELETE_SETTING)
            .bind(tenant)
            .bind(name)
            .execute(self.0)
            .await?;
        Ok(())
    }

    pub(crate) async fn debug_files(&self, tenant: &str) -> CatalogResult<Vec<DebugFile>> {
        Ok(sqlx::query_as::<DB, DebugFile>(sql::DEBUG_FILES)
            .bind(tenant)
            .fetch_all(self.0)
            .await?)
    }

    pub(crate) async fn debug_file(&self, tenant: &str, build_id: &str) -> CatalogResult<Option<DebugFile>> {
        Ok(sqlx::query_as::<DB, DebugFile>(sql::DEBUG_FILE)
            .bind(tenant)
            .bind(build_id)
            .fetch_optional(self.0)
            .await?)
    }

    pub(crate) async fn put_debug_file(&self, tenant: &str, file: &DebugFile) -> CatalogResult<()> {
        sqlx::query::<DB>(sql::PUT_DEBUG_FILE)
            .bind(tenant)
            .bind(file.build_id.as_str())
            .bind(file.object_key.as_str())
            .bind(file.file_name.as_str())
            .bind(file.size_bytes)
            .bind(file.uploaded_at_millis)
            .execute(self.0)
            .await?;
        Ok(())
    }

    // Looked up first: the affected-row count has no backend-independent accessor. A
    // delete racing another tells both callers the file was there, which is harmless.
    pub(crate) async fn delete_debug_file(&self, tenant: &str, build_id: &str) -> CatalogResult<bool> {
        let existed = self.debug_file(tenant, build_id).await?.is_some();
        sqlx::query::<DB>(sql::DELETE_DEBUG_FILE)
            .bind(tenant)
            .bind(build_id)
            .execute(self.0)
            .await?;
        Ok(existed)
    }

    pub(crate) async fn create_token(&self, token: &TenantToken, sha256_hex: &str) -> CatalogResult<()> {
        sqlx::query::<DB>(sql::CREATE_TOKEN)
            .bind(token.id.as_str())
            .bind(token.tenant.as_str())
            .bind(token.name.as_str())
            .bind(sha256_hex)
            .bind(token.created_at_millis)
            .execute(self.0)
            .await?;
        Ok(())
    }

    pub(crate) async fn tokens(&self, tenant: Option<&str>) -> CatalogResult<Vec<TenantToken>> {
        let query = match tenant {
            Some(tenant) => sqlx::query_as::<DB, TenantToken>(sql::TOKENS_OF_TENANT).bind(tenant),
            None => sqlx::query_as::<DB, TenantToken>(sql::TOKENS),
        };
        Ok(query.fetch_all(self.0).await?)
    }

    pub(crate) async fn revoke_token(&self, id: &str, at_millis: i64) -> CatalogResult<bool> {
        let row: Option<(String,)> = sqlx::query_as::<DB, (String,)>(sql::REVOKE_TOKEN)
            .bind(id)
            .bind(at_millis)
            .fetch_optional(self.0)
            .await?;
        Ok(row.is_some())
    }

    pub(crate) async fn token_by_hash(&self, sha256_hex: &str) -> CatalogResult<Option<TenantToken>> {
        Ok(sqlx::query_as::<DB, TenantToken>(sql::TOKEN_BY_HASH)
            .bind(sha256_hex)
            .fetch_optional(self.0)
            .await?)
    }
}
