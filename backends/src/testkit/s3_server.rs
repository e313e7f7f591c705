//! An in-process S3 server (s3s-fs) on `127.0.0.1`, for tests over real HTTP.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use s3s::dto::*;
use s3s::{S3, S3Request, S3Response, S3Result};

use super::Fixture;
use crate::ObjectStoreBackend;

/// The access key the test server accepts.
pub const ACCESS_KEY: &str = "skillstore-test";
/// The secret key the test server accepts.
pub const SECRET_KEY: &str = "skillstore-test-secret";
/// The region clients are told to use.
pub const REGION: &str = "us-east-1";

/// A running s3s-fs server backed by a temporary directory. It serves until
/// the process exits.
pub struct S3TestServer {
    endpoint: String,
    root: PathBuf,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for S3TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3TestServer")
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl S3TestServer {
    /// Starts a server on its own thread and runtime, bound to
    /// `127.0.0.1:0`.
    pub fn start() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let root = dir.path().to_path_buf();
        let served = root.clone();
        let addr = serve_on_thread("s3s-fs", move |ready| serve(served, ready));
        S3TestServer {
            endpoint: format!("http://{addr}"),
            root,
            _dir: dir,
        }
    }

    /// The server shared by every test of this process.
    pub fn shared() -> &'static S3TestServer {
        static SERVER: OnceLock<S3TestServer> = OnceLock::new();
        SERVER.get_or_init(S3TestServer::start)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Creates a new, empty bucket with a unique name and returns the name.
    pub fn create_bucket(&self) -> String {
        let name = unique_name("bucket");
        std::fs::create_dir(self.root.join(&name)).expect("creating the bucket directory");
        name
    }

    /// An [`ObjectStoreBackend`] over `bucket` of this server under
    /// `prefix`.
    pub fn backend(&self, bucket: &str, prefix: &str) -> ObjectStoreBackend {
        s3_backend(&self.endpoint, bucket, prefix)
    }

    /// Stores `data` at `key` by writing the server's file directly, for
    /// keys no S3 client sends as they are (a control character, say).
    pub fn put_raw(&self, bucket: &str, key: &str, data: &[u8]) {
        let path = self.root.join(bucket).join(key);
        std::fs::create_dir_all(path.parent().expect("a key has a parent")).expect("creating the key's directories");
        std::fs::write(path, data).expect("writing the object's file");
    }

    /// A client for `bucket` on this server.
    pub fn store(&self, bucket: &str) -> Arc<dyn ObjectStore> {
        client(&self.endpoint, bucket)
    }

    /// The `AWS_*` variables that point a `skillstore` process at this
    /// server.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", REGION.into()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
        ]
    }
}

/// Runs a server on a thread of its own, with a runtime of two workers, and
/// returns the address it reports once listening. It serves until the
/// process exits.
pub(crate) fn serve_on_thread<F, Fut>(name: &str, serve: F) -> std::net::SocketAddr
where
    F: FnOnce(std::sync::mpsc::Sender<std::net::SocketAddr>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a tokio runtime");
            runtime.block_on(serve(tx));
        })
        .expect("spawning a server thread");
    rx.recv().expect("the server reports its address")
}

/// URL-safe base64 without padding, as s3s-fs names its records.
fn base64_url(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// An [`ObjectStoreBackend`] over `bucket` under `prefix`, listing past
/// keys no path can hold as [`ObjectStoreBackend::from_s3_url`] does.
pub fn s3_backend(endpoint: &str, bucket: &str, prefix: &str) -> ObjectStoreBackend {
    let store = Arc::new(client_builder(endpoint, bucket).build().expect("an S3 client"));
    ObjectStoreBackend::new(Arc::clone(&store) as Arc<dyn ObjectStore>, prefix)
        .expect("a valid prefix")
        .with_paginated_listing(store)
        .with_identity(format!("s3|{endpoint}|{bucket}"))
}

/// An S3 client for `bucket` at `endpoint` with the test keys, path-style.
pub fn client(endpoint: &str, bucket: &str) -> Arc<dyn ObjectStore> {
    Arc::new(client_builder(endpoint, bucket).build().expect("an S3 client"))
}

/// The builder behind [`client`], for a test that sets timeouts or retries.
pub fn client_builder(endpoint: &str, bucket: &str) -> AmazonS3Builder {
    AmazonS3Builder::new()
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_bucket_name(bucket)
        .with_region(REGION)
        .with_access_key_id(ACCESS_KEY)
        .with_secret_access_key(SECRET_KEY)
        .with_virtual_hosted_style_request(false)
}

/// A name no other call in this process returns.
pub fn unique_name(stem: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{stem}-{}-{n}", std::process::id())
}

async fn serve(root: PathBuf, ready: std::sync::mpsc::Sender<std::net::SocketAddr>) {
    let fs = s3s_fs::FileSystem::new(&root).expect("an s3s-fs root");
    let service = {
        let mut builder = s3s::service::S3ServiceBuilder::new(FaithfulS3 {
            inner: fs,
            root,
            writes: tokio::sync::RwLock::new(()),
        });
        builder.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
        builder.build()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binding 127.0.0.1:0");
    ready
        .send(listener.local_addr().expect("a local address"))
        .expect("the starter is waiting");
    let http = ConnBuilder::new(TokioExecutor::new());
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        let conn = http
            .serve_connection(TokioIo::new(socket), service.clone())
            .into_owned();
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
}

/// s3s-fs with four behaviours of real S3 that it lacks: a listing gives
/// each object's ETag (s3s-fs leaves it out; it is the one a HEAD gives,
/// taken under the same lock as the listing, so it is that of the listed
/// bytes); a key naming a
/// "directory" is `NoSuchKey` (s3s-fs answers 500); a conditional write
/// (`If-None-Match`, `If-Match`) is atomic with respect to every other write
/// (s3s-fs checks, then writes); and a GET or HEAD gives the ETag of the
/// bytes it returns (s3s-fs opens the file, then reads the ETag from a
/// separate record a concurrent write may have replaced in between, which
/// would let a conditional writer overwrite a version it never read).
struct FaithfulS3 {
    inner: s3s_fs::FileSystem,
    root: PathBuf,
    /// Writes hold it exclusively; reads and listings share it.
    writes: tokio::sync::RwLock<()>,
}

impl FaithfulS3 {
    /// The ETag s3s-fs recorded for an object when it was written, read
    /// from its record directly (a HEAD per listed key would make a listing
    /// of thousands of keys take a third of a second).
    fn stored_e_tag(&self, bucket: &str, key: &str) -> Option<String> {
        let name = format!(
            ".bucket-{}.object-{}.internal.json",
            base64_url(bucket),
            base64_url(key)
        );
        let record: serde_json::Value = serde_json::from_slice(&std::fs::read(self.root.join(name)).ok()?).ok()?;
        record.get("e_tag")?.as_str().map(str::to_owned)
    }

    fn is_directory(&self, bucket: &str, key: &str) -> bool {
        let plain = key.split('/').all(|s| !s.is_empty() && s != "." && s != "..");
        plain && !bucket.contains(['/', '.']) && self.root.join(bucket).join(key).is_dir()
    }
}

/// Writes the `S3` impl: the listed methods go straight to s3s-fs, the
/// `serialized` ones take the write lock first. (One macro makes the whole
/// impl, so `async_trait` sees every method.)
macro_rules! faithful_impl {
    (
        direct { $($method:ident: $input:ty => $output:ty;)* }
        serialized { $($wmethod:ident: $winput:ty => $woutput:ty;)* }
    ) => {
        #[async_trait::async_trait]
        impl S3 for FaithfulS3 {
            async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
                if self.is_directory(&req.input.bucket, &req.input.key) {
                    return Err(s3s::s3_error!(NoSuchKey));
                }
                let _shared = self.writes.read().await;
                self.inner.head_object(req).await
            }

            async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
                if self.is_directory(&req.input.bucket, &req.input.key) {
                    return Err(s3s::s3_error!(NoSuchKey));
                }
                // The body streams from the file opened here; a later write
                // renames a new file into place and leaves this one intact.
                let _shared = self.writes.read().await;
                self.inner.get_object(req).await
            }

            async fn list_objects_v2(
                &self,
                req: S3Request<ListObjectsV2Input>,
            ) -> S3Result<S3Response<ListObjectsV2Output>> {
                let bucket = req.input.bucket.clone();
                let (method, uri, credentials, region, service) = (
                    req.method.clone(),
                    req.uri.clone(),
                    req.credentials.clone(),
                    req.region.clone(),
                    req.service.clone(),
                );
                let _shared = self.writes.read().await;
                let mut response = self.inner.list_objects_v2(req).await?;
                for object in response.output.contents.iter_mut().flatten() {
                    let Some(key) = object.key.clone() else { continue };
                    if let Some(tag) = self.stored_e_tag(&bucket, &key) {
                        object.e_tag = Some(ETag::Strong(tag));
                        continue;
                    }
                    let Ok(input) = HeadObjectInput::builder().bucket(bucket.clone()).key(key).build() else {
                        continue;
                    };
                    let head = S3Request {
                        input,
                        method: method.clone(),
                        uri: uri.clone(),
                        headers: Default::default(),
                        extensions: Default::default(),
                        credentials: credentials.clone(),
                        region: region.clone(),
                        service: service.clone(),
                        trailing_headers: None,
                    };
                    if let Ok(found) = self.inner.head_object(head).await {
                        object.e_tag = found.output.e_tag;
                    }
                }
                Ok(response)
            }

            $(
                async fn $method(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    self.inner.$method(req).await
                }
            )*

            $(
                async fn $wmethod(&self, req: S3Request<$winput>) -> S3Result<S3Response<$woutput>> {
                    let _turn = self.writes.write().await;
                    self.inner.$wmethod(req).await
                }
            )*
        }
    };
}

faithful_impl! {
    direct {
        list_objects: ListObjectsInput => ListObjectsOutput;
        list_buckets: ListBucketsInput => ListBucketsOutput;
        head_bucket: HeadBucketInput => HeadBucketOutput;
        get_bucket_location: GetBucketLocationInput => GetBucketLocationOutput;
        create_bucket: CreateBucketInput => CreateBucketOutput;
        create_multipart_upload: CreateMultipartUploadInput => CreateMultipartUploadOutput;
        upload_part: UploadPartInput => UploadPartOutput;
        list_parts: ListPartsInput => ListPartsOutput;
        abort_multipart_upload: AbortMultipartUploadInput => AbortMultipartUploadOutput;
    }
    serialized {
        put_object: PutObjectInput => PutObjectOutput;
        copy_object: CopyObjectInput => CopyObjectOutput;
        delete_object: DeleteObjectInput => DeleteObjectOutput;
        delete_objects: DeleteObjectsInput => DeleteObjectsOutput;
        complete_multipart_upload: CompleteMultipartUploadInput => CompleteMultipartUploadOutput;
    }
}

/// An [`ObjectStoreBackend`] over a fresh bucket of the shared server.
pub fn s3_fixture() -> Fixture {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    Fixture::new(server.backend(&bucket, "skills"))
}

/// The environment variable naming a second S3 server (moto) for the
/// `s3_moto` conformance run, as `http://127.0.0.1:PORT/BUCKET`.
pub const MOTO_ENV: &str = "SKILLSTORE_MOTO_ENDPOINT";

/// An [`ObjectStoreBackend`] under a fresh prefix of the bucket named by
/// [`MOTO_ENV`]. Panics when the variable is missing: a run that asks for
/// this target must not pass without it.
pub fn moto_fixture() -> Fixture {
    let Ok(url) = std::env::var(MOTO_ENV) else {
        panic!("{MOTO_ENV} is not set; start moto_server and set it to http://127.0.0.1:PORT/BUCKET");
    };
    let (endpoint, bucket) = url
        .trim_end_matches('/')
        .rsplit_once('/')
        .expect("http://host:port/bucket");
    Fixture::new(s3_backend(endpoint, bucket, &unique_name("suite")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn records_are_named_in_url_safe_base64() {
        assert_eq!(super::base64_url("bucket-1"), "YnVja2V0LTE");
        assert_eq!(super::base64_url("ab"), "YWI");
        assert_eq!(super::base64_url("a"), "YQ");
        assert_eq!(
            super::base64_url("catalog/base/x/SKILL.md"),
            "Y2F0YWxvZy9iYXNlL3gvU0tJTEwubWQ"
        );
    }
}
