//! What an error shows: the virtual path and the kind, never the endpoint,
//! the bucket or the key prefix a backend was opened on.

use std::time::Duration;

use skillstore_backends::testkit::fault_proxy::{Fault, FaultProxy};
use skillstore_backends::testkit::s3_server::S3TestServer;
use skillstore_backends::{Error, ErrorKind, ObjectStoreBackend, PutMode, ReadOptions, SkillBackend, VPath};

const PREFIX: &str = "tenant-prefix-7q";

fn p(s: &str) -> VPath {
    VPath::new(s).unwrap()
}

/// Every failing call of the backend, as its errors.
async fn failures(backend: &ObjectStoreBackend) -> Vec<Error> {
    let path = p("/pdf/SKILL.md");
    vec![
        backend.list(&p("/pdf")).await.unwrap_err(),
        backend.stat(&path).await.unwrap_err(),
        backend.read(&path, ReadOptions::default()).await.unwrap_err(),
        backend.put(&path, "x".into(), PutMode::Overwrite).await.unwrap_err(),
        backend.delete(&path).await.unwrap_err(),
    ]
}

fn assert_hidden(errors: &[Error], secrets: &[&str]) {
    for err in errors {
        let shown = err.to_string();
        for secret in secrets {
            assert!(!shown.contains(secret), "`{shown}` shows `{secret}`");
        }
        assert!(shown.contains("/pdf"), "`{shown}` names the virtual path");
        let logged = format!("{:?}", std::error::Error::source(err));
        assert!(
            logged.contains(PREFIX) || logged.contains("127.0.0.1"),
            "the source keeps the detail: {logged}"
        );
    }
}

#[tokio::test]
async fn messages_of_a_dead_endpoint_name_no_endpoint_bucket_or_prefix() {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let proxy = FaultProxy::start(server.endpoint(), Duration::from_secs(5));
    proxy.set_down(true);
    let backend = ObjectStoreBackend::new(proxy.client(&bucket, Duration::from_secs(2), 0), PREFIX).unwrap();
    let errors = failures(&backend).await;
    for err in &errors {
        assert!(matches!(err.kind(), ErrorKind::Unavailable | ErrorKind::Other), "{err}");
    }
    let endpoint = proxy.endpoint();
    let host_port = endpoint.trim_start_matches("http://");
    assert_hidden(&errors, &[host_port, "127.0.0.1", &bucket, PREFIX]);
}

#[tokio::test]
async fn messages_of_a_failing_request_name_no_endpoint_bucket_or_prefix() {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    let proxy = FaultProxy::start(server.endpoint(), Duration::from_secs(5));
    proxy.set_faults(&[Fault::InternalError]);
    proxy.set_rate(1.0);
    let backend = ObjectStoreBackend::new(proxy.client(&bucket, Duration::from_secs(2), 0), PREFIX).unwrap();
    let errors = failures(&backend).await;
    let endpoint = proxy.endpoint();
    let host_port = endpoint.trim_start_matches("http://");
    assert_hidden(&errors, &[host_port, "127.0.0.1", &bucket, PREFIX]);
}
