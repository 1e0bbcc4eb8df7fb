//! The response cache: model answers stored as plain JSON files, addressed by a digest of
//! the canonical request.
//!
//! `DIR/ab/abcdef....json` holds the answer to the request whose SHA-256 is `abcdef...`.
//! Files are written to a temporary name in the same folder and renamed into place, so
//! several processes can share one directory: a reader sees a whole file or none, and when
//! two writers store an answer to the same request, the first one stays and both use it.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Usage;
use super::settings::CacheMode;

/// One stored answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedReply {
    /// The request digest (the file's name), repeated so a moved file can be checked.
    pub key: String,
    pub model: String,
    pub text: String,
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone)]
pub struct ResponseCache {
    dir: PathBuf,
    mode: CacheMode,
}

impl ResponseCache {
    /// `None` for [`CacheMode::Off`]. The directory is created for `write`; for `read` and
    /// `replay` it must exist.
    pub fn open(dir: &Path, mode: CacheMode) -> Result<Option<ResponseCache>, String> {
        match mode {
            CacheMode::Off => return Ok(None),
            CacheMode::Write => std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create the response cache {}: {e}", dir.display()))?,
            CacheMode::Read | CacheMode::Replay => {
                if !dir.is_dir() {
                    return Err(format!("the response cache {} does not exist (cache mode {mode:?})", dir.display()));
                }
            }
        }
        Ok(Some(ResponseCache { dir: dir.to_path_buf(), mode }))
    }

    pub fn mode(&self) -> CacheMode {
        self.mode
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(&key[..2]).join(format!("{key}.json"))
    }

    /// The stored answer to `key`. A file that cannot be read or parsed is an error: it
    /// names the file, which the user can delete.
    pub fn get(&self, key: &str) -> Result<Option<CachedReply>, String> {
        let path = self.path(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read the cached answer {}: {e}", path.display())),
        };
        let reply: CachedReply = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the cached answer {} is damaged ({e}); delete it", path.display()))?;
        if reply.key != key {
            return Err(format!("the cached answer {} belongs to request {}", path.display(), reply.key));
        }
        Ok(Some(reply))
    }

    /// Store an answer (only in `write` mode) and return the answer the cache holds for its
    /// request: this one, or the one another process stored first.
    pub fn put(&self, reply: &CachedReply) -> Result<CachedReply, String> {
        if self.mode != CacheMode::Write {
            return Ok(reply.clone());
        }
        let path = self.path(&reply.key);
        let folder = path.parent().unwrap_or(&self.dir);
        let fail = |e: std::io::Error| format!("cannot store an answer in the response cache {}: {e}", path.display());
        std::fs::create_dir_all(folder).map_err(fail)?;
        let mut file = tempfile::NamedTempFile::new_in(folder).map_err(fail)?;
        let mut bytes = serde_json::to_vec_pretty(reply).map_err(|e| fail(std::io::Error::other(e)))?;
        bytes.push(b'\n');
        file.write_all(&bytes).map_err(fail)?;
        // Readable by whoever shares the directory, like any file the user creates.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = file.as_file().set_permissions(std::fs::Permissions::from_mode(0o644));
        }
        file.as_file().sync_all().map_err(fail)?;
        match file.persist_noclobber(&path) {
            Ok(_) => Ok(reply.clone()),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
                self.get(&reply.key)?.ok_or_else(|| format!("{} vanished while it was stored", path.display()))
            }
            Err(e) => Err(fail(e.error)),
        }
    }
}

/// SHA-256 of a JSON value written canonically (object keys sorted, no spaces), in hex.
pub fn digest(value: &serde_json::Value) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    hex(&Sha256::digest(text.as_bytes()))
}

/// SHA-256 of bytes, in hex.
pub fn digest_bytes(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn canonical(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digest_ignores_key_order_but_not_values() {
        let a = json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "t": 0.0});
        let b = json!({"t": 0.0, "messages": [{"content": "x", "role": "user"}], "model": "m"});
        assert_eq!(digest(&a), digest(&b));
        let c = json!({"t": 0.5, "messages": [{"content": "x", "role": "user"}], "model": "m"});
        assert_ne!(digest(&a), digest(&c));
    }

    #[test]
    fn answers_round_trip_and_damaged_files_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = ResponseCache::open(dir.path(), CacheMode::Write).expect("open").expect("on");
        let key = digest(&json!({"a": 1}));
        assert_eq!(cache.get(&key).expect("get"), None);
        let reply = CachedReply { key: key.clone(), model: "m".into(), text: "{}".into(), usage: None };
        assert_eq!(cache.put(&reply).expect("put"), reply);
        assert_eq!(cache.get(&key).expect("get"), Some(reply.clone()));
        let later = CachedReply { text: "{\"other\": 1}".into(), ..reply.clone() };
        assert_eq!(cache.put(&later).expect("second put"), reply, "the first answer stays");
        std::fs::write(cache.path(&key), "{not json").expect("damage");
        let err = cache.get(&key).expect_err("damaged");
        assert!(err.contains(&key) && err.contains("damaged"), "{err}");
        assert!(ResponseCache::open(&dir.path().join("missing"), CacheMode::Replay).is_err());
    }
}
