//! An in-process S3 server (s3s-fs) on `127.0.0.1`, for tests over real HTTP.

use std::path::{Path, PathBuf};
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

/// s3s-fs with five behaviours of real S3 that it lacks: a listing gives
/// each object's ETag (s3s-fs leaves it out; it is the one a HEAD gives,
/// taken under the same lock as the listing, so it is that of the listed
/// bytes); a listing costs what its prefix holds, not what the bucket holds
/// ([`list_scoped`]); a key naming a "directory" is `NoSuchKey` (s3s-fs
/// answers 500); a conditional write (`If-None-Match`, `If-Match`) is atomic
/// with respect to every other write (s3s-fs checks, then writes); and a GET
/// or HEAD gives the ETag of the bytes it returns (s3s-fs opens the file,
/// then reads the ETag from a separate record a concurrent write may have
/// replaced in between, which would let a conditional writer overwrite a
/// version it never read).
struct FaithfulS3 {
    inner: s3s_fs::FileSystem,
    root: PathBuf,
    /// Writes hold it exclusively; reads and listings share it.
    writes: tokio::sync::RwLock<()>,
}

impl FaithfulS3 {
    fn is_directory(&self, bucket: &str, key: &str) -> bool {
        let plain = key.split('/').all(|s| !s.is_empty() && s != "." && s != "..");
        plain && !bucket.contains(['/', '.']) && self.root.join(bucket).join(key).is_dir()
    }
}

/// The ETag s3s-fs recorded for an object when it was written, read from
/// its record directly (a HEAD per listed key would make a listing of
/// thousands of keys take a third of a second).
fn stored_e_tag(root: &Path, bucket: &str, key: &str) -> Option<String> {
    let name = format!(
        ".bucket-{}.object-{}.internal.json",
        base64_url(bucket),
        base64_url(key)
    );
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(root.join(name)).ok()?).ok()?;
    record.get("e_tag")?.as_str().map(str::to_owned)
}

/// `ListObjectsV2` as S3 answers it, over the files s3s-fs keeps: only the
/// directory the prefix names is walked (s3s-fs walks the whole bucket for
/// every page, so a listing's cost would follow the bucket, not the keys
/// listed), keys sort bytewise, `start-after` and the continuation token
/// resume after a key, a delimiter folds keys into common prefixes, and
/// every listed object carries its ETag.
fn list_scoped(root: &Path, input: ListObjectsV2Input) -> S3Result<ListObjectsV2Output> {
    let bucket_ok =
        !input.bucket.is_empty() && !input.bucket.contains('/') && input.bucket != "." && input.bucket != "..";
    let bucket_root = root.join(&input.bucket);
    if !bucket_ok || !bucket_root.is_dir() {
        return Err(s3s::s3_error!(NoSuchBucket));
    }
    let prefix = input.prefix.as_deref().unwrap_or("").trim_start_matches('/');
    let delimiter = input.delimiter.as_deref().filter(|d| !d.is_empty());
    let max_keys = usize::try_from(input.max_keys.unwrap_or(1000)).unwrap_or(1000);
    let resume = match (input.continuation_token.as_deref(), input.start_after.as_deref()) {
        (Some(token), Some(after)) => Some(token.max(after)),
        (token, after) => token.or(after),
    };

    // Keys are file paths, so only the directory before the prefix's last
    // `/` can hold a match; a prefix no stored path can begin with matches
    // nothing.
    let dir = prefix.rfind('/').map_or("", |end| &prefix[..end]);
    let plain = dir.is_empty() || dir.split('/').all(|s| !s.is_empty() && s != "." && s != "..");
    let mut keys = Vec::new();
    if plain {
        let mut pending = vec![(bucket_root.join(dir), dir.to_owned())];
        while let Some((path, key_dir)) = pending.pop() {
            let entries = match std::fs::read_dir(&path) {
                Ok(entries) => entries,
                // Missing, a file, or a name too long to be stored: no key
                // lies under it.
                Err(_) if !path.is_dir() => continue,
                Err(_) => return Err(s3s::s3_error!(InternalError)),
            };
            for entry in entries {
                let entry = entry.map_err(|_| s3s::s3_error!(InternalError))?;
                let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                    continue;
                };
                let key = if key_dir.is_empty() {
                    name
                } else {
                    format!("{key_dir}/{name}")
                };
                let kind = entry.file_type().map_err(|_| s3s::s3_error!(InternalError))?;
                if kind.is_dir() {
                    if key.starts_with(prefix) || prefix.starts_with(&format!("{key}/")) {
                        pending.push((entry.path(), key));
                    }
                } else if key.starts_with(prefix) {
                    keys.push((key, entry.path()));
                }
            }
        }
    }
    keys.sort_unstable();

    // Each entry: the key or common prefix, and the file when it is a key.
    let mut entries: Vec<(String, Option<PathBuf>)> = Vec::new();
    for (key, path) in keys {
        let folded = delimiter.and_then(|d| {
            key[prefix.len()..]
                .find(d)
                .map(|at| key[..prefix.len() + at + d.len()].to_owned())
        });
        let entry = match folded {
            Some(common) => (common, None),
            None => (key, Some(path)),
        };
        if resume.is_some_and(|after| entry.0.as_str() <= after) {
            continue;
        }
        if entries.last().is_some_and(|last| last.0 == entry.0) {
            continue;
        }
        entries.push(entry);
    }
    let is_truncated = max_keys > 0 && entries.len() > max_keys;
    entries.truncate(max_keys);
    let next_continuation_token = is_truncated.then(|| entries.last().map(|e| e.0.clone())).flatten();
    let key_count = i32::try_from(entries.len()).map_err(|_| s3s::s3_error!(InternalError))?;

    let mut contents = Vec::new();
    let mut common_prefixes = Vec::new();
    for (key, path) in entries {
        let Some(path) = path else {
            common_prefixes.push(CommonPrefix { prefix: Some(key) });
            continue;
        };
        // A file deleted since the walk is simply not listed.
        let Ok(metadata) = std::fs::metadata(&path) else {
            continue;
        };
        let e_tag = stored_e_tag(root, &input.bucket, &key).map(ETag::Strong);
        contents.push(Object {
            e_tag,
            last_modified: metadata.modified().ok().map(Timestamp::from),
            size: i64::try_from(metadata.len()).ok(),
            key: Some(key),
            ..Default::default()
        });
    }

    Ok(ListObjectsV2Output {
        key_count: Some(key_count),
        max_keys: input.max_keys.or(Some(1000)),
        is_truncated: Some(is_truncated),
        contents: (!contents.is_empty()).then_some(contents),
        common_prefixes: (!common_prefixes.is_empty()).then_some(common_prefixes),
        continuation_token: input.continuation_token,
        next_continuation_token,
        delimiter: input.delimiter,
        encoding_type: input.encoding_type,
        name: Some(input.bucket),
        prefix: input.prefix,
        start_after: input.start_after,
        ..Default::default()
    })
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
                let _shared = self.writes.read().await;
                let root = self.root.clone();
                let bucket = req.input.bucket.clone();
                let input = req.input;
                let mut output = tokio::task::spawn_blocking(move || list_scoped(&root, input))
                    .await
                    .map_err(|_| s3s::s3_error!(InternalError))??;
                // An object stored without s3s-fs's record (`put_raw`) gets
                // the ETag a HEAD computes for it.
                for object in output.contents.iter_mut().flatten() {
                    let Some(key) = object.key.clone().filter(|_| object.e_tag.is_none()) else { continue };
                    let Ok(input) = HeadObjectInput::builder().bucket(bucket.clone()).key(key).build() else {
                        continue;
                    };
                    let head = S3Request {
                        input,
                        method: req.method.clone(),
                        uri: req.uri.clone(),
                        headers: Default::default(),
                        extensions: Default::default(),
                        credentials: req.credentials.clone(),
                        region: req.region.clone(),
                        service: req.service.clone(),
                        trailing_headers: None,
                    };
                    if let Ok(found) = self.inner.head_object(head).await {
                        object.e_tag = found.output.e_tag;
                    }
                }
                Ok(S3Response::new(output))
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
    // moto checks `If-None-Match: *` and then writes, with no lock between:
    // under load two simultaneous create-only writes have both succeeded.
    Fixture::new(s3_backend(endpoint, bucket, &unique_name("suite"))).without_atomic_conditionals()
}

#[cfg(test)]
mod tests {
    use s3s::dto::ListObjectsV2Input;

    /// Lists `bucket` of `root` page by page; returns every page's keys and
    /// common prefixes, in order.
    fn pages(
        root: &std::path::Path,
        prefix: &str,
        delimiter: Option<&str>,
        max_keys: i32,
        start_after: Option<&str>,
    ) -> Vec<(Vec<String>, Vec<String>)> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let input = ListObjectsV2Input::builder()
                .bucket("b".into())
                .prefix(Some(prefix.into()))
                .delimiter(delimiter.map(str::to_owned))
                .max_keys(Some(max_keys))
                .start_after(start_after.map(str::to_owned))
                .continuation_token(token.take())
                .build()
                .unwrap();
            let page = super::list_scoped(root, input).unwrap();
            let keys = page
                .contents
                .unwrap_or_default()
                .into_iter()
                .filter_map(|o| o.key)
                .collect();
            let common = page
                .common_prefixes
                .unwrap_or_default()
                .into_iter()
                .filter_map(|p| p.prefix)
                .collect();
            out.push((keys, common));
            match page.next_continuation_token {
                Some(next) => {
                    assert_eq!(page.is_truncated, Some(true));
                    token = Some(next);
                }
                None => {
                    assert_eq!(page.is_truncated, Some(false));
                    return out;
                }
            }
        }
    }

    fn bucket_with(keys: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for key in keys {
            let path = dir.path().join("b").join(key);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, key).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("b")).unwrap();
        dir
    }

    const KEYS: &[&str] = &["a/b/x", "a/b/y/z", "a/bc/x", "a/b-/x", "a/c", "top", "ab/x"];

    #[test]
    fn a_prefix_lists_every_key_it_begins_and_nothing_else_in_byte_order() {
        let dir = bucket_with(KEYS);
        let all = |prefix| pages(dir.path(), prefix, None, 1000, None).remove(0).0;
        assert_eq!(all("a/b"), ["a/b-/x", "a/b/x", "a/b/y/z", "a/bc/x"]);
        assert_eq!(all("a/b/"), ["a/b/x", "a/b/y/z"]);
        assert_eq!(all("a"), ["a/b-/x", "a/b/x", "a/b/y/z", "a/bc/x", "a/c", "ab/x"]);
        assert_eq!(all(""), ["a/b-/x", "a/b/x", "a/b/y/z", "a/bc/x", "a/c", "ab/x", "top"]);
        assert!(all("missing/").is_empty());
        assert!(all("a//b").is_empty());
        assert!(all("a/../a/").is_empty());
    }

    #[test]
    fn pages_resume_after_their_last_key_and_start_after_skips() {
        let dir = bucket_with(KEYS);
        let paged = pages(dir.path(), "", None, 2, None);
        let keys: Vec<String> = paged.iter().flat_map(|p| p.0.clone()).collect();
        assert_eq!(keys, ["a/b-/x", "a/b/x", "a/b/y/z", "a/bc/x", "a/c", "ab/x", "top"]);
        assert_eq!(paged.len(), 4);
        assert!(paged.iter().all(|p| p.0.len() <= 2));
        let after = pages(dir.path(), "", None, 1000, Some("a/c")).remove(0).0;
        assert_eq!(after, ["ab/x", "top"]);
    }

    #[test]
    fn a_delimiter_folds_keys_into_common_prefixes_once_each() {
        let dir = bucket_with(KEYS);
        let (keys, common) = pages(dir.path(), "a/", Some("/"), 1000, None).remove(0);
        assert_eq!(keys, ["a/c"]);
        assert_eq!(common, ["a/b-/", "a/b/", "a/bc/"]);
        let paged = pages(dir.path(), "a/", Some("/"), 1, None);
        let flat: Vec<String> = paged.iter().flat_map(|p| p.0.iter().chain(&p.1).cloned()).collect();
        assert_eq!(flat, ["a/b-/", "a/b/", "a/bc/", "a/c"]);
    }

    #[test]
    fn a_missing_bucket_is_no_such_bucket() {
        let dir = bucket_with(&[]);
        let input = ListObjectsV2Input::builder().bucket("nope".into()).build().unwrap();
        let err = super::list_scoped(dir.path(), input).unwrap_err();
        assert_eq!(*err.code(), s3s::S3ErrorCode::NoSuchBucket);
    }

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
