//! The live page as a `tower::Service` ([`DashboardService`]), for an application that has a
//! web framework of its own: mounted in its router (`axum::Router::nest_service`, say) it
//! serves the same page, state and redelivery as the standalone server, through the same
//! routes and checks, without a port or thread of its own.

use std::convert::Infallible;
use std::fmt;
use std::future::{poll_fn, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::{pin, Pin};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::task::{Context, Poll};

use http_body::Body;

use super::history::History;
use super::http::{Request, Response, MAX_BODY};
use super::{route, token, Reached, Shared};
use crate::bus::Bus;

/// The live page of `bus` as a [`tower_service::Service`], to mount in an application's
/// router under a prefix of its choice. It answers the same routes as [`serve`](super::serve)'s
/// server (`/`, `/api/state`, `POST /api/redeliver`), relative to where it is mounted.
///
/// Reading is open to whoever reaches the mount point with a `Host` of `localhost`, an IP
/// address, or a name given to [`allow_host`](DashboardService::allow_host). A redelivery
/// needs, beside that, the token embedded in the page it served (in an `X-Eventbus-Token`
/// header, which a cross-site form cannot set) and an `Origin`, if sent, of the same host.
/// The connection's addresses are the application's to check: put the mount point behind
/// its authentication, as any admin page.
///
/// Like the standalone server, it does not keep the bus open.
///
/// # Examples
///
/// With axum 0.8, the page at `/admin/bus` beside the application's own routes:
///
/// ```no_run
/// # async fn run() -> std::io::Result<()> {
/// let bus = eventbus::Bus::new();
/// let app: axum::Router = axum::Router::new()
///     .route("/", axum::routing::get(|| async { "the shop" }))
///     .nest_service("/admin/bus", eventbus::dashboard::service(&bus));
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// axum::serve(listener, app).await
/// # }
/// ```
///
/// Any `tower` stack takes it the same way; here a request made by hand:
///
/// ```
/// use eventbus::Bus;
/// use tower_service::Service;
///
/// let bus = Bus::new();
/// let mut page = eventbus::dashboard::service(&bus);
/// let request = http::Request::get("/api/state")
///     .header("Host", "localhost:8080")
///     .body(String::new())
///     .unwrap();
/// let response = futures_lite_block_on(page.call(request)).unwrap();
/// assert_eq!(response.status(), 200);
/// assert!(response.body().contains("\"closed\":false"));
/// # bus.close();
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     let waker = std::task::Waker::noop();
/// #     let mut cx = std::task::Context::from_waker(&waker);
/// #     let mut f = std::pin::pin!(f);
/// #     loop {
/// #         if let std::task::Poll::Ready(out) = f.as_mut().poll(&mut cx) {
/// #             return out;
/// #         }
/// #     }
/// # }
/// ```
pub fn service(bus: &Bus) -> DashboardService {
    DashboardService {
        shared: Arc::new(Shared {
            history: History::new(&bus.stats()),
            _sampling: None,
            bus: bus.worker_handle(),
            token: token(),
            port: 0,
            connections: AtomicUsize::new(0),
            draining: AtomicUsize::new(0),
        }),
        hosts: Arc::from(Vec::new()),
    }
}

/// The live page as a service, from [`service`]. Cloning it is cheap; every clone serves the
/// same page with the same token.
#[derive(Clone)]
pub struct DashboardService {
    shared: Arc<Shared>,
    hosts: Arc<[String]>,
}

impl DashboardService {
    /// Answers requests whose `Host` names `name` too (`shop.example.com`), on any port:
    /// the names the application is reached by. `localhost` and IP addresses are always
    /// answered; any other name could be an attacker's, made to resolve to the application
    /// (DNS rebinding), and is refused with a 403.
    pub fn allow_host(mut self, name: impl Into<String>) -> Self {
        let mut hosts = self.hosts.to_vec();
        hosts.push(name.into());
        self.hosts = Arc::from(hosts);
        self
    }
}

impl fmt::Debug for DashboardService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DashboardService")
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl<B> tower_service::Service<http::Request<B>> for DashboardService
where
    B: Body + Send + 'static,
    B::Data: Send,
{
    type Response = http::Response<String>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let (shared, hosts) = (Arc::clone(&self.shared), Arc::clone(&self.hosts));
        Box::pin(async move {
            let (head, body) = request.into_parts();
            let response = match read(head, body).await {
                Err(refused) => refused,
                Ok(request) => {
                    let reached = Reached::Mounted { hosts: &hosts };
                    let response =
                        catch_unwind(AssertUnwindSafe(|| route(&shared, &reached, &request)))
                            .unwrap_or_else(|_| {
                                Response::error(500, "the server failed on this request")
                            });
                    if request.method == "HEAD" {
                        response.head_only()
                    } else {
                        response
                    }
                }
            };
            Ok(into_http(response))
        })
    }
}

/// The request as the routes take it: its body read whole, up to [`MAX_BODY`].
async fn read<B: Body>(head: http::request::Parts, body: B) -> Result<Request, Response> {
    let mut headers = Vec::with_capacity(head.headers.len());
    for (name, value) in &head.headers {
        let Ok(value) = value.to_str() else {
            return Err(Response::error(
                400,
                &format!("header `{name}` is not text"),
            ));
        };
        headers.push((name.as_str().to_owned(), value.to_owned()));
    }
    // The router gives the target as the client wrote it; an absolute form has the Host too.
    if head.headers.get(http::header::HOST).is_none() {
        if let Some(authority) = head.uri.authority() {
            headers.push(("host".into(), authority.as_str().to_owned()));
        }
    }
    let mut bytes = Vec::new();
    let mut body = pin!(body);
    while let Some(frame) = poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let Ok(frame) = frame else {
            return Err(Response::error(400, "the request's body could not be read"));
        };
        if let Ok(mut data) = frame.into_data() {
            use bytes::Buf;
            while data.has_remaining() {
                let chunk = data.chunk();
                if bytes.len() + chunk.len() > MAX_BODY {
                    return Err(Response::error(413, "the request's body is too large"));
                }
                bytes.extend_from_slice(chunk);
                let n = chunk.len();
                data.advance(n);
            }
        }
    }
    let version = match head.version {
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_11 => "HTTP/1.1",
        http::Version::HTTP_2 => "HTTP/2",
        http::Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/0.9",
    };
    let path = head.uri.path();
    Ok(Request::new(
        head.method.as_str().to_owned(),
        version.to_owned(),
        if path.is_empty() { "/" } else { path }.to_owned(),
        headers,
        bytes,
    ))
}

fn into_http(response: Response) -> http::Response<String> {
    let body = if response.head_only {
        String::new()
    } else {
        // Every body the routes make is text: HTML, script, style or JSON.
        String::from_utf8_lossy(&response.body).into_owned()
    };
    let mut built = http::Response::builder().status(response.status);
    for (name, value) in &response.headers {
        built = built.header(*name, value);
    }
    if response.head_only {
        built = built.header(http::header::CONTENT_LENGTH, response.body.len());
    }
    built.body(body).unwrap_or_else(|_| {
        let mut failed = http::Response::new(String::new());
        *failed.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
        failed
    })
}
