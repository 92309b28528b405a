//! Image loading shared by `read_image` and `describe_image` (SPEC §3 "Images"): where the
//! bytes come from, what type they are, and the checks every image passes.
//!
//! Data flow: [`load_image`] sends an http(s) URL to [`download`] and anything else to
//! [`read_path`] (resolved against the workspace; absolute paths are used as they are).
//!
//! - A path is `stat`ed first, so a directory, a device or a FIFO is refused before it is
//!   opened and an oversized file before a byte is read; the read itself runs on a blocking
//!   thread and never takes more than the limit + 1 byte, even if the file grows meanwhile.
//!   Type: magic bytes, else the file extension.
//! - A URL is fetched with the session's HTTP client. A declared `content-length` over the
//!   limit is refused before the body is read; the body is streamed chunk by chunk and the
//!   download stops as soon as it passes the limit, so at most the limit plus one chunk is ever
//!   held. Type: a supported `content-type`, else magic bytes, else the URL's extension (an
//!   unsupported `content-type` is kept for the error text).
//!
//! Then the common checks run in a fixed order: empty, too large, unsupported type. Every
//! failure is an [`ImageError`] whose `Display` is the exact model-visible text; cancellation
//! (user abort or the tool's timeout) is [`ImageError::Aborted`], which the tools report as
//! `aborted` and the Environment words.

use std::io::Read;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use tokio_util::sync::CancellationToken;

/// Largest accepted image in bytes: 5 MiB, the strictest single-image cap among the providers
/// (Anthropic's is about 5 MB). An image the provider rejects would make every later request
/// of the session fail, and a bigger one would bloat the context and the trace.
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// The four image types every supported provider accepts.
pub const SUPPORTED_MIME_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Extension (lower case, without the dot) → MIME type, the fallback when sniffing fails.
const EXTENSION_MIME_TYPES: [(&str, &str); 5] = [
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
];

/// Why an image could not be loaded. `Display` is the exact text the model reads.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// The path names a directory, a device or another non-regular file.
    #[error("Failed to read image \"{src}\": path is not a file.")]
    NotAFile {
        /// The `source` argument as given.
        src: String,
    },
    /// The file could not be read (missing, permission denied, ...).
    #[error("Failed to read image \"{src}\": {detail}")]
    Read {
        /// The `source` argument as given.
        src: String,
        /// What the operating system said, with the resolved path.
        detail: String,
    },
    /// The server answered with a non-success status.
    #[error("Failed to download image \"{src}\": HTTP {status}")]
    HttpStatus {
        /// The URL as given.
        src: String,
        /// The HTTP status code.
        status: u16,
    },
    /// The request or the body transfer failed.
    #[error("Failed to download image \"{src}\": {detail}")]
    Download {
        /// The URL as given.
        src: String,
        /// The transport error and its causes.
        detail: String,
    },
    /// Zero bytes: no provider accepts an empty image.
    #[error("Image \"{src}\" is empty.")]
    Empty {
        /// The `source` argument as given.
        src: String,
    },
    /// Over [`MAX_IMAGE_BYTES`]; `size` is the file size, the declared length, or what a
    /// stream without a declared length had delivered when it passed the limit.
    #[error(
        "Image too large: {} exceeds the {} limit.",
        format_size(*size),
        format_size(MAX_IMAGE_BYTES)
    )]
    TooLarge {
        /// Size in bytes.
        size: u64,
    },
    /// Not png, jpeg, gif or webp; `mime` is what was detected or declared, if anything.
    #[error(
        "Unsupported image type{}: only png, jpeg, gif and webp are supported.",
        mime.as_ref().map(|m| format!(" \"{m}\"")).unwrap_or_default()
    )]
    Unsupported {
        /// The detected or declared type, `None` when nothing identified it.
        mime: Option<String>,
    },
    /// The tool's cancel token fired (user abort or timeout) while loading.
    #[error("image loading was interrupted")]
    Aborted,
}

/// A loaded, checked image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedImage {
    /// The raw bytes (1 ..= [`MAX_IMAGE_BYTES`]).
    pub bytes: Vec<u8>,
    /// One of [`SUPPORTED_MIME_TYPES`].
    pub mime: &'static str,
}

impl LoadedImage {
    /// `<mime>, <size>`, the model-visible one-line summary.
    pub fn summary(&self) -> String {
        format!("{}, {}", self.mime, format_size(self.bytes.len() as u64))
    }

    /// `data:<mime>;base64,<bytes>`.
    pub fn data_url(&self) -> String {
        format!(
            "data:{};base64,{}",
            self.mime,
            base64::engine::general_purpose::STANDARD.encode(&self.bytes)
        )
    }
}

/// Formats a byte count as `<n> B`, `<x.x> kB` or `<x.x> MB` (base 1024, one decimal,
/// halves rounded up).
pub fn format_size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    // Integer arithmetic: tenths rounded half up, so 1280 B is "1.3 kB" (a float format would
    // round that exact half to even).
    let tenths = |unit: u64| -> String {
        let t = (u128::from(bytes) * 10 + u128::from(unit) / 2) / u128::from(unit);
        format!("{}.{}", t / 10, t % 10)
    };
    if bytes < KIB {
        format!("{bytes} B")
    } else if bytes < MIB {
        format!("{} kB", tenths(KIB))
    } else {
        format!("{} MB", tenths(MIB))
    }
}

/// The image type named by the leading magic bytes, if any.
pub fn sniff_mime(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0x89, 0x50, 0x4E, 0x47]) {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        Some("image/webp")
    } else {
        None
    }
}

/// The image type named by the extension of a path (or a URL's path), if any.
pub fn mime_from_extension(path: &str) -> Option<&'static str> {
    let ext = Path::new(path).extension()?.to_str()?.to_ascii_lowercase();
    EXTENSION_MIME_TYPES
        .iter()
        .find(|(e, _)| *e == ext)
        .map(|(_, mime)| *mime)
}

/// The supported type equal to `mime`, as a static string.
fn supported(mime: &str) -> Option<&'static str> {
    SUPPORTED_MIME_TYPES.iter().copied().find(|m| *m == mime)
}

/// The type of a downloaded image: a supported `content-type`, else magic bytes, else the
/// URL path's extension; when none of them names an image, the declared `content-type` (if
/// any) so the error can quote it.
pub fn url_mime(content_type: Option<&str>, bytes: &[u8], url_path: &str) -> Option<String> {
    let declared = content_type
        .and_then(|ct| ct.split(';').next())
        .map(|ct| ct.trim().to_ascii_lowercase())
        .filter(|ct| !ct.is_empty());
    if let Some(mime) = declared.as_deref().and_then(supported) {
        return Some(mime.to_owned());
    }
    sniff_mime(bytes)
        .or_else(|| mime_from_extension(url_path))
        .map(str::to_owned)
        .or(declared)
}

/// Whether `source` is an http(s) URL (scheme compared case-insensitively).
pub fn is_http_url(source: &str) -> bool {
    let lower = source.get(..8).unwrap_or(source).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// Loads and checks the image `source` names; see the module docs.
pub async fn load_image(
    source: &str,
    workspace_dir: &Path,
    http: &reqwest::Client,
    cancel: &CancellationToken,
) -> Result<LoadedImage, ImageError> {
    if cancel.is_cancelled() {
        return Err(ImageError::Aborted);
    }
    let (bytes, mime) = if is_http_url(source) {
        let (bytes, content_type) = download(source, http, cancel).await?;
        let url_path = reqwest::Url::parse(source)
            .map(|u| u.path().to_owned())
            .unwrap_or_default();
        let mime = url_mime(content_type.as_deref(), &bytes, &url_path);
        (bytes, mime)
    } else {
        let path = workspace_dir.join(source);
        let bytes = read_path(source, path.clone(), cancel).await?;
        let mime = sniff_mime(&bytes)
            .or_else(|| mime_from_extension(&path.to_string_lossy()))
            .map(str::to_owned);
        (bytes, mime)
    };
    check(source, bytes, mime)
}

/// The checks every loaded image passes, in the SPEC's order.
fn check(source: &str, bytes: Vec<u8>, mime: Option<String>) -> Result<LoadedImage, ImageError> {
    if bytes.is_empty() {
        return Err(ImageError::Empty {
            src: source.to_owned(),
        });
    }
    let size = bytes.len() as u64;
    if size > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge { size });
    }
    match mime.as_deref().and_then(supported) {
        Some(mime) => Ok(LoadedImage { bytes, mime }),
        None => Err(ImageError::Unsupported { mime }),
    }
}

/// Reads a workspace file on a blocking thread (stat first, at most the limit + 1 byte).
/// Cancellation returns at once; the blocking read, bounded by the limit, finishes unobserved.
async fn read_path(
    source: &str,
    path: PathBuf,
    cancel: &CancellationToken,
) -> Result<Vec<u8>, ImageError> {
    let src = source.to_owned();
    let task = tokio::task::spawn_blocking(move || read_file_bounded(&src, &path));
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(ImageError::Aborted),
        joined = task => joined.unwrap_or_else(|e| Err(ImageError::Read {
            src: source.to_owned(),
            detail: format!("the read task failed: {e}"),
        })),
    }
}

fn read_file_bounded(src: &str, path: &Path) -> Result<Vec<u8>, ImageError> {
    let read_error = |err: std::io::Error| ImageError::Read {
        src: src.to_owned(),
        detail: describe_io_error(path, &err),
    };
    // `metadata` follows symlinks, so a link to a regular file is a file.
    let meta = std::fs::metadata(path).map_err(read_error)?;
    if !meta.is_file() {
        return Err(ImageError::NotAFile {
            src: src.to_owned(),
        });
    }
    if meta.len() > MAX_IMAGE_BYTES {
        return Err(ImageError::TooLarge { size: meta.len() });
    }
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    let mut limited = (&file).take(MAX_IMAGE_BYTES + 1);
    limited.read_to_end(&mut bytes).map_err(read_error)?;
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        // The file grew after the stat: report its current size.
        let size = file
            .metadata()
            .map(|m| m.len())
            .unwrap_or(0)
            .max(bytes.len() as u64);
        return Err(ImageError::TooLarge { size });
    }
    Ok(bytes)
}

/// The OS error in words a model can act on, with the resolved path.
fn describe_io_error(path: &Path, err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => format!("{} does not exist.", path.display()),
        std::io::ErrorKind::PermissionDenied => {
            format!("permission denied reading {}.", path.display())
        }
        _ => format!("{}: {err}", path.display()),
    }
}

/// Downloads `url` with the limit applied while streaming; returns the body and the
/// `content-type` header.
async fn download(
    url: &str,
    http: &reqwest::Client,
    cancel: &CancellationToken,
) -> Result<(Vec<u8>, Option<String>), ImageError> {
    let failed = |err: reqwest::Error| ImageError::Download {
        src: url.to_owned(),
        detail: error_chain(&err.without_url()),
    };
    let sent = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(ImageError::Aborted),
        sent = http.get(url).send() => sent,
    };
    let mut response = sent.map_err(failed)?;
    let status = response.status();
    if !status.is_success() {
        return Err(ImageError::HttpStatus {
            src: url.to_owned(),
            status: status.as_u16(),
        });
    }
    let declared = response.content_length();
    if let Some(size) = declared.filter(|n| *n > MAX_IMAGE_BYTES) {
        return Err(ImageError::TooLarge { size });
    }
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let capacity = declared.unwrap_or(0).min(MAX_IMAGE_BYTES);
    let mut bytes = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
    loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(ImageError::Aborted),
            next = response.chunk() => next,
        };
        match next.map_err(failed)? {
            Some(chunk) => {
                let total = bytes.len() as u64 + chunk.len() as u64;
                if total > MAX_IMAGE_BYTES {
                    return Err(ImageError::TooLarge { size: total });
                }
                bytes.extend_from_slice(&chunk);
            }
            None => break,
        }
    }
    Ok((bytes, content_type))
}

/// An error and its causes, `: `-joined, skipping causes already spelled out by their parent.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_formatted_in_base_1024_with_one_decimal() {
        let table: [(u64, &str); 11] = [
            (0, "0 B"),
            (1, "1 B"),
            (1023, "1023 B"),
            (1024, "1.0 kB"),
            (1280, "1.3 kB"), // an exact half rounds up
            (1536, "1.5 kB"),
            (10 * 1024 + 51, "10.0 kB"),
            (1024 * 1024 - 1, "1024.0 kB"),
            (1024 * 1024, "1.0 MB"),
            (MAX_IMAGE_BYTES, "5.0 MB"),
            (6 * 1024 * 1024 + 300 * 1024, "6.3 MB"),
        ];
        for (bytes, want) in table {
            assert_eq!(format_size(bytes), want, "{bytes}");
        }
    }

    #[test]
    fn magic_bytes_name_the_four_formats() {
        let table: [(&[u8], Option<&str>); 11] = [
            (b"\x89PNG\r\n\x1a\n", Some("image/png")),
            (b"\x89PNG", Some("image/png")),
            (b"\xFF\xD8\xFF\xE0", Some("image/jpeg")),
            (b"\xFF\xD8", None),
            (b"GIF87a....", Some("image/gif")),
            (b"GIF89a", Some("image/gif")),
            (b"GIF88a", None),
            (b"RIFF\x24\x00\x00\x00WEBPVP8 ", Some("image/webp")),
            (b"RIFF\x24\x00\x00\x00WAVEfmt ", None),
            (b"<html>", None),
            (b"", None),
        ];
        for (bytes, want) in table {
            assert_eq!(sniff_mime(bytes), want, "{bytes:?}");
        }
    }

    #[test]
    fn extensions_are_a_case_insensitive_fallback() {
        let table = [
            ("a.png", Some("image/png")),
            ("dir.d/A.JPG", Some("image/jpeg")),
            ("x.jpeg", Some("image/jpeg")),
            ("/abs/x.Gif", Some("image/gif")),
            ("x.webp", Some("image/webp")),
            ("x.svg", None),
            ("png", None),
            ("", None),
        ];
        for (path, want) in table {
            assert_eq!(mime_from_extension(path), want, "{path}");
        }
    }

    /// `(content-type, body, URL path, expected type)`.
    type UrlCase<'a> = (Option<&'a str>, &'a [u8], &'a str, Option<&'a str>);

    #[test]
    fn url_type_is_header_then_magic_then_extension() {
        let png: &[u8] = b"\x89PNG\r\n\x1a\n";
        let table: [UrlCase; 8] = [
            (Some("image/webp"), png, "/a.gif", Some("image/webp")),
            (
                Some("IMAGE/PNG; charset=binary"),
                b"?",
                "/a",
                Some("image/png"),
            ),
            (
                Some("application/octet-stream"),
                png,
                "/a.gif",
                Some("image/png"),
            ),
            (
                Some("application/octet-stream"),
                b"?",
                "/a.gif",
                Some("image/gif"),
            ),
            (
                Some("text/html; charset=utf-8"),
                b"<html>",
                "/a",
                Some("text/html"),
            ),
            (Some(""), b"?", "/a", None),
            (None, b"?", "/", None),
            (None, b"GIF89a", "/", Some("image/gif")),
        ];
        for (ct, bytes, path, want) in table {
            assert_eq!(url_mime(ct, bytes, path).as_deref(), want, "{ct:?} {path}");
        }
    }

    #[test]
    fn only_http_and_https_are_urls() {
        assert!(is_http_url("http://x/a.png"));
        assert!(is_http_url("HTTPS://x/a.png"));
        assert!(!is_http_url("ftp://x/a.png"));
        assert!(!is_http_url("http:/x"));
        assert!(!is_http_url("images/http://x.png"));
        assert!(!is_http_url("é"));
    }

    #[test]
    fn error_texts_match_the_spec() {
        let table = [
            (
                ImageError::Unsupported { mime: None },
                "Unsupported image type: only png, jpeg, gif and webp are supported.",
            ),
            (
                ImageError::Unsupported {
                    mime: Some("text/html".into()),
                },
                "Unsupported image type \"text/html\": only png, jpeg, gif and webp are supported.",
            ),
            (
                ImageError::TooLarge {
                    size: 6 * 1024 * 1024,
                },
                "Image too large: 6.0 MB exceeds the 5.0 MB limit.",
            ),
            (
                ImageError::Empty {
                    src: "e.png".into(),
                },
                "Image \"e.png\" is empty.",
            ),
        ];
        for (err, want) in table {
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn the_last_check_refuses_in_spec_order() {
        assert_eq!(
            check("e.png", Vec::new(), Some("image/png".into())),
            Err(ImageError::Empty {
                src: "e.png".into()
            })
        );
        assert_eq!(
            check("t.txt", b"hello".to_vec(), None),
            Err(ImageError::Unsupported { mime: None })
        );
        assert_eq!(
            check("p", b"x".to_vec(), Some("image/png".into())),
            Ok(LoadedImage {
                bytes: b"x".to_vec(),
                mime: "image/png"
            })
        );
    }
}
