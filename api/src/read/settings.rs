//! `settings.v1.SettingsService`: named values per tenant, kept in the catalog (the
//! Profiles Drilldown app stores its settings as one JSON string named `pluginSettings`).
//! Reads run on the query engine as every read does; writes go to the catalog.

use stackhouse_proto::pyroscope_settings::{
    DeleteSettingsRequest, DeleteSettingsResponse, GetSettingsRequest, GetSettingsResponse,
    SetSettingsRequest, SetSettingsResponse, Setting,
};
use stackhouse_storage::catalog;

use stackhouse_query::pyroscope::{Caller, NANOS_PER_MILLI};

use super::connect::rpc;
use crate::error::ApiError;
use crate::route::Route;
use crate::state::AppState;

pub(super) fn routes() -> Vec<Route> {
    vec![
        Route::new("/settings.v1.SettingsService/Get", rpc(get)),
        Route::new("/settings.v1.SettingsService/Set", rpc(set)),
        Route::new("/settings.v1.SettingsService/Delete", rpc(delete)),
    ]
}

fn to_wire(s: catalog::Setting) -> Setting {
    Setting {
        name: s.name,
        value: s.value,
        modified_at: s.modified_at_millis,
    }
}

pub(super) async fn get(
    state: AppState,
    call: Caller,
    _: GetSettingsRequest,
) -> Result<GetSettingsResponse, ApiError> {
    let settings = state.engine.settings(&call.tenant).await?;
    Ok(GetSettingsResponse {
        settings: settings.into_iter().map(to_wire).collect(),
    })
}

/// Stores the setting; without `modifiedAt` it is stamped now. A write older than the
/// stored value does not replace it, and the answer carries what is stored.
pub(super) async fn set(
    state: AppState,
    call: Caller,
    r: SetSettingsRequest,
) -> Result<SetSettingsResponse, ApiError> {
    let Some(setting) = r.setting else {
        return Err(ApiError::invalid("setting is required"));
    };
    if setting.name.is_empty() {
        return Err(ApiError::invalid("setting name must not be empty"));
    }
    let modified_at_millis = match setting.modified_at {
        0 => state.clock.now_nanos() / NANOS_PER_MILLI,
        at => at,
    };
    let tenant = written_tenant(&call)?;
    let stored = state
        .catalog
        .put_setting(
            &tenant,
            &catalog::Setting {
                name: setting.name,
                value: setting.value,
                modified_at_millis,
            },
        )
        .await?;
    Ok(SetSettingsResponse {
        setting: Some(to_wire(stored)),
    })
}

pub(super) async fn delete(
    state: AppState,
    call: Caller,
    r: DeleteSettingsRequest,
) -> Result<DeleteSettingsResponse, ApiError> {
    let tenant = written_tenant(&call)?;
    state.catalog.delete_setting(&tenant, &r.name).await?;
    Ok(DeleteSettingsResponse {})
}

/// The one tenant a settings read or change is for: reads of other families may name
/// several, settings are per tenant.
pub(super) fn written_tenant(call: &Caller) -> Result<String, ApiError> {
    crate::tenant::parse(Some(call.tenant.as_bytes())).map_err(ApiError::invalid)
}
