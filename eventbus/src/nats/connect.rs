//! How a bridge connects ([`ConnectOptions`]): credentials (user and password, token, a
//! credentials file), TLS (required, root certificates, a client certificate) and the
//! client's name, turned into the client's own options.

use std::fmt;
use std::path::PathBuf;

/// How [`Bridge::connect_with`](super::Bridge::connect_with) reaches a server that asks for
/// credentials or TLS. Everything is off by default ([`Bridge::connect`](super::Bridge::connect)
/// uses the defaults); a `tls://` URL also turns TLS on.
///
/// `Debug` shows which credentials are set, never their values.
///
/// # Examples
///
/// ```no_run
/// use eventbus::{nats::{Bridge, ConnectOptions}, Bus};
///
/// # #[tokio::main] async fn main() -> Result<(), eventbus::nats::Error> {
/// let bus = Bus::builder().build();
/// let options = ConnectOptions::new()
///     .user_and_password("shop", "s3cret")
///     .require_tls(true)
///     .root_certificate("/etc/nats/ca.pem")
///     .name("shop-1");
/// let bridge = Bridge::connect_with(&bus, "nats://nats.internal:4222", options).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Default)]
pub struct ConnectOptions {
    user_and_password: Option<(String, String)>,
    token: Option<String>,
    credentials_file: Option<PathBuf>,
    require_tls: bool,
    root_certificates: Vec<PathBuf>,
    client_certificate: Option<(PathBuf, PathBuf)>,
    name: Option<String>,
}

impl ConnectOptions {
    /// No credentials, no TLS unless the URL asks for it, no name.
    pub fn new() -> ConnectOptions {
        ConnectOptions::default()
    }

    /// Authenticates with a user and a password (the server's `authorization { user,
    /// password }` or `accounts { .. users }`).
    pub fn user_and_password(
        mut self,
        user: impl Into<String>,
        password: impl Into<String>,
    ) -> ConnectOptions {
        self.user_and_password = Some((user.into(), password.into()));
        self
    }

    /// Authenticates with a token (the server's `authorization { token }`).
    pub fn token(mut self, token: impl Into<String>) -> ConnectOptions {
        self.token = Some(token.into());
        self
    }

    /// Authenticates with a `.creds` file (a JWT and an NKey seed, as `nsc` writes them),
    /// read when the bridge connects.
    pub fn credentials_file(mut self, path: impl Into<PathBuf>) -> ConnectOptions {
        self.credentials_file = Some(path.into());
        self
    }

    /// Refuses a server that does not speak TLS.
    pub fn require_tls(mut self, required: bool) -> ConnectOptions {
        self.require_tls = required;
        self
    }

    /// Trusts the certificate authorities in this PEM file (besides the system's); may be
    /// given several times.
    pub fn root_certificate(mut self, path: impl Into<PathBuf>) -> ConnectOptions {
        self.root_certificates.push(path.into());
        self
    }

    /// Presents this client certificate and its key (PEM files), for a server that verifies
    /// clients.
    pub fn client_certificate(
        mut self,
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> ConnectOptions {
        self.client_certificate = Some((cert.into(), key.into()));
        self
    }

    /// The client's name, shown by the server (`/connz`, its logs).
    pub fn name(mut self, name: impl Into<String>) -> ConnectOptions {
        self.name = Some(name.into());
        self
    }

    /// The client's options: these on top of `base`; `Err` if the credentials file cannot
    /// be read.
    pub(super) async fn apply(
        &self,
        base: async_nats::ConnectOptions,
    ) -> std::io::Result<async_nats::ConnectOptions> {
        let mut options = match &self.credentials_file {
            Some(path) => base.credentials_file(path).await.map_err(|error| {
                std::io::Error::new(
                    error.kind(),
                    format!(
                        "cannot read the credentials file `{}`: {error}",
                        path.display()
                    ),
                )
            })?,
            None => base,
        };
        if let Some((user, password)) = &self.user_and_password {
            options = options.user_and_password(user.clone(), password.clone());
        }
        if let Some(token) = &self.token {
            options = options.token(token.clone());
        }
        if self.require_tls {
            options = options.require_tls(true);
        }
        for root in &self.root_certificates {
            options = options.add_root_certificates(root.clone());
        }
        if let Some((cert, key)) = &self.client_certificate {
            options = options.add_client_certificate(cert.clone(), key.clone());
        }
        if let Some(name) = &self.name {
            options = options.name(name);
        }
        Ok(options)
    }
}

impl fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectOptions")
            .field(
                "user",
                &self.user_and_password.as_ref().map(|(user, _)| user),
            )
            .field(
                "password",
                &self.user_and_password.as_ref().map(|_| "<redacted>"),
            )
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("credentials_file", &self.credentials_file)
            .field("require_tls", &self.require_tls)
            .field("root_certificates", &self.root_certificates)
            .field("client_certificate", &self.client_certificate)
            .field("name", &self.name)
            .finish()
    }
}
