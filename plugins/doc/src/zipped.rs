//! Reading the parts of an Office Open XML package without letting a ZIP
//! bomb through: every part's declared size and compression ratio are checked
//! before inflating, and inflated bytes are counted against caps as they come
//! (a lying header does not help).

use std::io::{Cursor, Read};

use toolhost_sdk::ToolError;
use zip::ZipArchive;

/// Largest part inflated, bytes.
const MAX_PART: u64 = 48 << 20;
/// Most bytes inflated from one document in all.
const MAX_TOTAL: u64 = 160 << 20;
/// A part inflating to more than this many times its compressed size (and
/// over 1 MiB) is a bomb, not a document: XML compresses ~10-20×.
const MAX_RATIO: u64 = 200;

pub struct Package<'a> {
    archive: ZipArchive<Cursor<&'a [u8]>>,
    inflated: u64,
}

impl<'a> Package<'a> {
    pub fn open(bytes: &'a [u8]) -> Result<Package<'a>, ToolError> {
        let archive = ZipArchive::new(Cursor::new(bytes))
            .map_err(|e| ToolError::invalid_input(format!("a damaged ZIP archive: {e}")))?;
        let mut package = Package {
            archive,
            inflated: 0,
        };
        package.check_declared()?;
        Ok(package)
    }

    /// Refuse a package whose parts declare bomb-like sizes.
    fn check_declared(&mut self) -> Result<(), ToolError> {
        let mut total = 0u64;
        for i in 0..self.archive.len() {
            let file = self
                .archive
                .by_index_raw(i)
                .map_err(|e| ToolError::invalid_input(format!("a damaged ZIP archive: {e}")))?;
            let (size, packed) = (file.size(), file.compressed_size().max(1));
            total = total.saturating_add(size);
            if size > MAX_PART || (size > 1 << 20 && size / packed > MAX_RATIO) {
                return Err(bomb(file.name(), size, packed));
            }
        }
        if total > MAX_TOTAL {
            return Err(ToolError::invalid_input(format!(
                "this document's parts inflate to {} MB in all; at most {} MB are read \
                 (a ZIP bomb?)",
                total >> 20,
                MAX_TOTAL >> 20
            )));
        }
        Ok(())
    }

    pub fn has(&self, name: &str) -> bool {
        self.archive.index_for_name(name).is_some()
    }

    /// The part `name` as text, `None` when the package has no such part.
    pub fn text(&mut self, name: &str) -> Result<Option<String>, ToolError> {
        let Some(i) = self.archive.index_for_name(name) else {
            return Ok(None);
        };
        let file = self
            .archive
            .by_index(i)
            .map_err(|e| ToolError::invalid_input(format!("cannot read `{name}`: {e}")))?;
        let packed = file.compressed_size().max(1);
        let budget = MAX_PART.min(MAX_TOTAL - self.inflated);
        let mut bytes = Vec::new();
        file.take(budget + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ToolError::invalid_input(format!("cannot inflate `{name}`: {e}")))?;
        let size = bytes.len() as u64;
        if size > budget || (size > 1 << 20 && size / packed > MAX_RATIO) {
            return Err(bomb(name, size, packed));
        }
        self.inflated += size;
        Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
    }
}

fn bomb(name: &str, size: u64, packed: u64) -> ToolError {
    ToolError::invalid_input(format!(
        "refused: the part `{name}` inflates to {} MB from {} KB (a ZIP bomb, not a \
         document); parts up to {} MB and {MAX_RATIO}× compression are read",
        size >> 20,
        packed >> 10,
        MAX_PART >> 20
    ))
}
