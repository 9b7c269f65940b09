//! A route: a path, its handlers and, for the documented API, what the OpenAPI document
//! says about them. A handler annotated with `#[utoipa::path]` is routed with
//! [`documented!`], which takes the path from the annotation: the document lists exactly
//! the routes served, and a new endpoint adds no line to a list elsewhere.

use axum::routing::MethodRouter;
use utoipa::openapi::path::Paths;
use utoipa::openapi::schema::Schema;
use utoipa::openapi::{Components, RefOr};
use utoipa_axum::router::UtoipaMethodRouter;

use crate::state::AppState;

pub struct Route {
    pub path: String,
    pub handlers: MethodRouter<AppState>,
    /// The path's operations and the schemas they name; `None` outside the documented API
    /// (Connect methods, Pyroscope's paths, the web UI).
    doc: Option<(Paths, Schemas)>,
}

/// Schemas by name, as `utoipa_axum::routes!` collects them.
type Schemas = Vec<(String, RefOr<Schema>)>;

impl Route {
    /// A route the OpenAPI document does not describe.
    pub fn new(path: impl Into<String>, handlers: MethodRouter<AppState>) -> Route {
        Route {
            path: path.into(),
            handlers,
            doc: None,
        }
    }

    /// The handlers of one path, as `utoipa_axum::routes!` collects them; see [`documented!`].
    pub fn documented((schemas, paths, handlers): UtoipaMethodRouter<AppState>) -> Route {
        let path = paths
            .paths
            .keys()
            .next()
            .cloned()
            .expect("routes! collects at least one annotated handler");
        Route {
            path,
            handlers,
            doc: Some((paths, schemas)),
        }
    }

    pub fn is_documented(&self) -> bool {
        self.doc.is_some()
    }
}

/// The paths and schemas `routes` document, for the OpenAPI document.
pub(crate) fn document(routes: Vec<Route>) -> (Paths, Components) {
    let mut paths = Paths::new();
    let mut components = Components::new();
    for (path, schemas) in routes.into_iter().filter_map(|r| r.doc) {
        paths.merge(path);
        components.schemas.extend(schemas);
    }
    (paths, components)
}

/// A [`Route`] of handlers annotated with `#[utoipa::path]` (one path; one handler per
/// method), documented by their annotations.
macro_rules! documented {
    ($($handler:path),+ $(,)?) => {
        $crate::route::Route::documented(utoipa_axum::routes!($($handler),+))
    };
}
pub(crate) use documented;
