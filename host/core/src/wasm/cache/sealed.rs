//! Where an entry's payload is read to: a memfd, sealed once the payload is
//! in it.
//!
//! The payload is hashed (for its tag) chunk by chunk as it is copied, so
//! the bytes checked are exactly the bytes in the memfd; the seals then
//! forbid every write, so they stay those bytes. wasmtime maps the memfd as
//! it maps a `.cwasm` file: the code runs from it and the memory images of
//! the component's data are made from it, with no second copy (reading into
//! memory and letting `Component::deserialize` copy it again cost a 40 MB
//! Python entry ~60 ms, mostly page faults).
//!
//! Mapping the entry file itself would save even this copy, but a file in a
//! plugins folder's `.compile-cache/` can be rewritten in place, after the
//! check and under the mapped code, by whoever writes that folder. Where no
//! memfd can be made (an old kernel, a seccomp filter), the payload is read
//! into memory and deserialized from there, as before.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;

use rustix::fs::{MemfdFlags, SealFlags};

/// Bytes copied at a time (small enough to stay in the cache between the
/// hash and the write).
const CHUNK: usize = 256 * 1024;

/// A memfd holding a payload, sealed against every change.
pub(super) struct Sealed(File);

impl Sealed {
    /// A path wasmtime opens the memfd by (the same file, seals and all).
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.0.as_raw_fd()))
    }

    /// The payload read back into memory (where wasmtime cannot open the
    /// memfd by its path: no `/proc`).
    pub fn to_vec(&self) -> std::io::Result<Vec<u8>> {
        let len = usize::try_from(self.0.metadata()?.len()).map_err(std::io::Error::other)?;
        let mut bytes = vec![0; len];
        std::os::unix::fs::FileExt::read_exact_at(&self.0, &mut bytes, 0)?;
        Ok(bytes)
    }
}

/// A memfd not yet sealed: only its maker holds it.
pub(super) struct Unsealed(File);

impl Unsealed {
    /// An empty memfd to copy a payload into; an error where none can be
    /// made.
    pub fn create() -> std::io::Result<Unsealed> {
        let flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
        // Linux 6.3+ wants to be told the memfd may be mapped executable
        // (it logs a warning otherwise); older kernels refuse the flag.
        let fd = rustix::fs::memfd_create("toolhost-cwasm", flags | MemfdFlags::EXEC)
            .or_else(|_| rustix::fs::memfd_create("toolhost-cwasm", flags))?;
        Ok(Unsealed(File::from(fd)))
    }

    /// Copy `len` bytes of `from` in, hashing them into `tag`, then seal.
    pub fn fill(
        mut self,
        from: &mut impl Read,
        len: u64,
        tag: &mut blake3::Hasher,
    ) -> std::io::Result<Sealed> {
        self.0.set_len(len)?;
        copy_hashed(from, len, tag, &mut self.0)?;
        rustix::fs::fcntl_add_seals(
            &self.0,
            SealFlags::WRITE | SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL,
        )?;
        Ok(Sealed(self.0))
    }
}

/// Copy exactly `len` bytes of `from` to `to`, each hashed into `tag` as it
/// passes (a source that ends early is an error).
pub(super) fn copy_hashed(
    from: &mut impl Read,
    len: u64,
    tag: &mut blake3::Hasher,
    to: &mut impl Write,
) -> std::io::Result<()> {
    let mut chunk = vec![0u8; CHUNK];
    let mut left = len;
    while left > 0 {
        let want = CHUNK.min(usize::try_from(left).unwrap_or(CHUNK));
        let n = from.read(&mut chunk[..want])?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        tag.update(&chunk[..n]);
        to.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_is_the_hashed_bytes_and_cannot_change() {
        let payload: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i % 251) as u8).collect();
        let mut source = payload.clone();
        source.extend_from_slice(b"after the payload: not copied");
        let mut tag = blake3::Hasher::new();
        let sealed = Unsealed::create()
            .unwrap()
            .fill(&mut source.as_slice(), payload.len() as u64, &mut tag)
            .unwrap();
        assert_eq!(sealed.to_vec().unwrap(), payload);
        assert_eq!(tag.finalize(), blake3::hash(&payload));

        // Opened again by its path (as wasmtime does), it is the same file,
        // and neither a write, a truncation nor a growth gets through.
        let path = sealed.path();
        assert_eq!(std::fs::read(&path).unwrap(), payload);
        let mut again = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        assert!(again.write_all(b"planted").is_err(), "a write");
        assert!(again.set_len(10).is_err(), "a truncation");
        assert!(
            again.set_len(payload.len() as u64 + 4096).is_err(),
            "a growth"
        );
        assert!(
            rustix::fs::fcntl_get_seals(&again)
                .unwrap()
                .contains(SealFlags::SEAL),
            "the seals themselves are sealed"
        );
        assert_eq!(std::fs::read(&path).unwrap(), payload);
    }

    #[test]
    fn a_source_that_ends_early_is_an_error() {
        let mut tag = blake3::Hasher::new();
        let short = [1u8; 100];
        let e = Unsealed::create()
            .unwrap()
            .fill(&mut short.as_slice(), 200, &mut tag)
            .err()
            .unwrap();
        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
        let mut into = Vec::new();
        assert!(copy_hashed(&mut short.as_slice(), 200, &mut tag, &mut into).is_err());
    }
}
