//! Building an [`ObjectStoreBackend`] from an `s3://bucket/prefix` location.

use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::{BackoffConfig, ClientConfigKey, RetryConfig};

use crate::error::{Error, ErrorKind, Result};
use crate::object::ObjectStoreBackend;

/// Network settings for S3 backends. The defaults bound every call: a dead
/// endpoint fails in seconds rather than hanging a catalog load.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct S3Options {
    /// Time allowed to open a connection.
    pub connect_timeout: Duration,
    /// Time allowed for one request, body included.
    pub request_timeout: Duration,
    /// Retries of a failed request (object_store's retry with backoff).
    pub max_retries: usize,
    /// Time after which no further retry is started.
    pub retry_timeout: Duration,
}

impl Default for S3Options {
    fn default() -> Self {
        S3Options {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            max_retries: 4,
            retry_timeout: Duration::from_secs(30),
        }
    }
}

/// A parsed `s3://bucket[/prefix]` location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    /// The bucket name.
    pub bucket: String,
    /// The key prefix, without leading or trailing `/` (may be empty).
    pub prefix: String,
}

impl S3Location {
    /// Parses `s3://bucket` or `s3://bucket/some/prefix`.
    pub fn parse(url: &str) -> Result<Self> {
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad_location(url, "expected s3://bucket[/prefix]"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad_location(url, "the bucket name is empty"));
        }
        Ok(S3Location {
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
        })
    }
}

/// A refused location: the reason is shown, the location itself (a bucket
/// and a prefix) only through the source.
fn bad_location(url: &str, why: &str) -> Error {
    Error::new(ErrorKind::InvalidPath)
        .with_detail(format!("bad S3 location: {why}"))
        .with_source(std::io::Error::other(format!("the location was `{url}`")))
}

impl ObjectStoreBackend {
    /// An S3 backend for `s3://bucket[/prefix]`, configured from the usual
    /// `AWS_*` environment variables (`AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`,
    /// `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`). With an endpoint set, requests are path-style
    /// (`endpoint/bucket/key`), as local S3-compatible servers expect.
    /// Without an access key in the environment, requests are unsigned.
    pub fn from_s3_url(url: &str, options: &S3Options) -> Result<Self> {
        let location = S3Location::parse(url)?;
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&location.bucket)
            .with_virtual_hosted_style_request(false)
            // Set key by key: replacing the client options would drop the
            // ones `from_env` read (such as AWS_ALLOW_HTTP).
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                format!("{}ms", options.connect_timeout.as_millis()),
            )
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
                format!("{}ms", options.request_timeout.as_millis()),
            )
            .with_retry(RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: options.max_retries,
                retry_timeout: options.retry_timeout,
            });
        if std::env::var_os("AWS_ACCESS_KEY_ID").is_none() && std::env::var_os("AWS_WEB_IDENTITY_TOKEN_FILE").is_none()
        {
            builder = builder.with_skip_signature(true);
        }
        let identity = format!(
            "s3|{}|{}|{}",
            builder
                .get_config_value(&AmazonS3ConfigKey::Endpoint)
                .unwrap_or_default(),
            builder.get_config_value(&AmazonS3ConfigKey::Region).unwrap_or_default(),
            location.bucket
        );
        let store = builder.build().map_err(|e| {
            Error::new(ErrorKind::Other)
                .with_detail("cannot configure the S3 client")
                .with_source(e)
        })?;
        let store = Arc::new(store);
        Ok(ObjectStoreBackend::new(Arc::clone(&store) as _, &location.prefix)?
            .with_paginated_listing(store)
            .with_identity(identity))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bucket_and_prefix() {
        let loc = S3Location::parse("s3://skills/tenants/acme/").unwrap();
        assert_eq!(loc.bucket, "skills");
        assert_eq!(loc.prefix, "tenants/acme");
        assert_eq!(S3Location::parse("s3://skills").unwrap().prefix, "");
        assert!(S3Location::parse("s3:///x").is_err());
        assert!(S3Location::parse("http://skills").is_err());
    }
}
