//! How requests and answers travel, shared by every route: bodies (size limits, gzip,
//! content types), Connect's codec (protobuf or protojson), and the query string.

pub mod body;
pub mod connect;
pub mod query_string;
