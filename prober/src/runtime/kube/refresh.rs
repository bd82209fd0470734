//! The client's bearer token from an exec plugin, run again before it expires and once on a
//! 401, as client-go's exec authenticator does: an EKS token lives about 15 minutes, and a run
//! and its cleanup can outlast it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderValue, Request, Response, StatusCode};
use kube::client::Body;
use tower::{BoxError, Layer, Service, ServiceExt as _};

/// A token is fetched again this close to its expiry (client-go fetches when it is past).
pub const LEEWAY_SECS: u64 = 30;

/// A bearer token and when it expires (unix seconds; `None`: not said).
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub value: String,
    pub expires: Option<u64>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("expires", &self.expires)
            .finish_non_exhaustive()
    }
}

type Fetching = Pin<Box<dyn Future<Output = Result<Token, BoxError>> + Send>>;
/// Fetches a new token (runs the plugin again).
pub type Fetch = Arc<dyn Fn() -> Fetching + Send + Sync>;

struct Shared {
    /// Held while a token is fetched: requests at the same time wait for that one run.
    current: tokio::sync::Mutex<Token>,
    fetch: Fetch,
    now: fn() -> u64,
}

impl Shared {
    /// The token to send: fetched again first when it is within [`LEEWAY_SECS`] of expiry.
    async fn token(&self) -> Result<String, BoxError> {
        let mut cur = self.current.lock().await;
        if cur
            .expires
            .is_some_and(|e| (self.now)().saturating_add(LEEWAY_SECS) >= e)
        {
            *cur = (self.fetch)().await?;
        }
        Ok(cur.value.clone())
    }

    /// The token after `used` was refused: fetched again unless another request already did.
    async fn after_401(&self, used: &str) -> Result<String, BoxError> {
        let mut cur = self.current.lock().await;
        if cur.value == used {
            *cur = (self.fetch)().await?;
        }
        Ok(cur.value.clone())
    }
}

/// Puts the current token on every request (see the module's words).
#[derive(Clone)]
pub struct RefreshLayer(Arc<Shared>);

impl RefreshLayer {
    #[must_use]
    pub fn new(first: Token, fetch: Fetch) -> Self {
        Self::with_clock(first, fetch, probe_proto::util::unix_secs)
    }

    fn with_clock(first: Token, fetch: Fetch, now: fn() -> u64) -> Self {
        Self(Arc::new(Shared {
            current: tokio::sync::Mutex::new(first),
            fetch,
            now,
        }))
    }
}

impl<S> Layer<S> for RefreshLayer {
    type Service = Refresh<S>;
    fn layer(&self, inner: S) -> Refresh<S> {
        Refresh {
            inner: Arc::new(tokio::sync::Mutex::new(inner)),
            shared: self.0.clone(),
        }
    }
}

/// The service of [`RefreshLayer`].
pub struct Refresh<S> {
    /// Shared so a refused request can be sent again from its future.
    inner: Arc<tokio::sync::Mutex<S>>,
    shared: Arc<Shared>,
}

impl<S> Clone for Refresh<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
        }
    }
}

/// The request again, when its body can be had twice (a kube request's is bytes, or none).
fn copy_of(req: &Request<Body>) -> Option<Request<Body>> {
    let mut copy = Request::new(req.body().try_clone()?);
    *copy.method_mut() = req.method().clone();
    *copy.uri_mut() = req.uri().clone();
    *copy.version_mut() = req.version();
    *copy.headers_mut() = req.headers().clone();
    *copy.extensions_mut() = req.extensions().clone();
    Some(copy)
}

fn bearing(mut req: Request<Body>, token: &str) -> Result<Request<Body>, BoxError> {
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| "the exec plugin's token cannot be sent in an HTTP header")?;
    value.set_sensitive(true);
    req.headers_mut().insert(http::header::AUTHORIZATION, value);
    Ok(req)
}

async fn send<S, B>(
    inner: &tokio::sync::Mutex<S>,
    req: Request<Body>,
) -> Result<Response<B>, BoxError>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    let call = {
        let mut svc = inner.lock().await;
        svc.ready().await.map_err(Into::into)?;
        svc.call(req)
    };
    call.await.map_err(Into::into)
}

impl<S, B> Service<Request<Body>> for Refresh<S>
where
    S: Service<Request<Body>, Response = Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
{
    type Response = Response<B>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<B>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // The inner service is made ready under its lock, when the request is sent.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let (inner, shared) = (self.inner.clone(), self.shared.clone());
        Box::pin(async move {
            let token = shared.token().await?;
            let again = copy_of(&req);
            let resp = send(&inner, bearing(req, &token)?).await?;
            let Some(again) = again.filter(|_| resp.status() == StatusCode::UNAUTHORIZED) else {
                return Ok(resp);
            };
            let fresh = shared.after_401(&token).await?;
            if fresh == token {
                return Ok(resp);
            }
            drop(resp);
            send(&inner, bearing(again, &fresh)?).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const NOW: u64 = 1_000_000;

    type Api = tower_test::mock::Mock<Request<Body>, Response<String>>;
    type ApiHandle = tower_test::mock::Handle<Request<Body>, Response<String>>;

    /// A layer over a mock API server whose first token is `first`; each fetch hands out
    /// `fresh-N` (N from 1), valid for an hour.
    fn layered(first: Token) -> (Refresh<Api>, ApiHandle, Arc<AtomicUsize>) {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let fetch: Fetch = Arc::new(move || {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move {
                Ok(Token {
                    value: format!("fresh-{n}"),
                    expires: Some(NOW + 3600),
                })
            })
        });
        let (mock, handle) = tower_test::mock::pair();
        let layer = RefreshLayer::with_clock(first, fetch, || NOW);
        (layer.layer(mock), handle, runs)
    }

    /// The next request the mock API server is sent (a refusal not sent again fails here).
    async fn next(
        handle: &mut ApiHandle,
    ) -> (
        Request<Body>,
        tower_test::mock::SendResponse<Response<String>>,
    ) {
        tokio::time::timeout(std::time::Duration::from_secs(10), handle.next_request())
            .await
            .expect("no request sent")
            .unwrap()
    }

    fn get() -> Request<Body> {
        Request::get("/api/v1/nodes").body(Body::empty()).unwrap()
    }

    fn bearer(req: &Request<Body>) -> String {
        req.headers()[http::header::AUTHORIZATION]
            .to_str()
            .unwrap()
            .to_string()
    }

    fn answer(code: u16) -> Response<String> {
        Response::builder()
            .status(code)
            .body(String::new())
            .unwrap()
    }

    #[tokio::test]
    async fn a_token_near_its_expiry_is_fetched_again_before_it_is_sent() {
        for (expires, want, runs_want) in [
            (Some(NOW + 3600), "Bearer old", 0),
            (None, "Bearer old", 0),
            (Some(NOW + LEEWAY_SECS - 1), "Bearer fresh-1", 1),
            (Some(NOW - 5), "Bearer fresh-1", 1),
        ] {
            let first = Token {
                value: "old".into(),
                expires,
            };
            let (mut svc, mut handle, runs) = layered(first);
            let call = tokio::spawn(svc.call(get()));
            let (req, reply) = next(&mut handle).await;
            assert_eq!(bearer(&req), want, "{expires:?}");
            reply.send_response(answer(200));
            assert_eq!(call.await.unwrap().unwrap().status(), 200);
            assert_eq!(runs.load(Ordering::SeqCst), runs_want, "{expires:?}");
        }
    }

    #[tokio::test]
    async fn a_401_fetches_once_and_sends_the_request_again() {
        let first = Token {
            value: "old".into(),
            expires: None,
        };
        let (mut svc, mut handle, runs) = layered(first);
        let call = tokio::spawn(
            svc.call(
                Request::post("/api/v1/namespaces")
                    .body(Body::from(b"{\"kind\":\"Namespace\"}".to_vec()))
                    .unwrap(),
            ),
        );
        let (req, reply) = next(&mut handle).await;
        assert_eq!(bearer(&req), "Bearer old");
        reply.send_response(answer(401));
        let (req, reply) = next(&mut handle).await;
        assert_eq!(bearer(&req), "Bearer fresh-1");
        assert_eq!(req.method(), "POST");
        let body = http_body_util::BodyExt::collect(req.into_body())
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(&body[..], b"{\"kind\":\"Namespace\"}");
        reply.send_response(answer(201));
        assert_eq!(call.await.unwrap().unwrap().status(), 201);
        // A fresh token refused too is the answer: one fetch per refusal, no loop.
        let call = tokio::spawn(svc.call(get()));
        let (req, reply) = next(&mut handle).await;
        assert_eq!(bearer(&req), "Bearer fresh-1");
        reply.send_response(answer(401));
        let (req, reply) = next(&mut handle).await;
        assert_eq!(bearer(&req), "Bearer fresh-2");
        reply.send_response(answer(401));
        assert_eq!(call.await.unwrap().unwrap().status(), 401);
        assert_eq!(runs.load(Ordering::SeqCst), 2);
    }
}
