//! The shipped `doc` plugin (#23): real documents (tests/fixtures/docs, with
//! their origin and licence) read through the real binary and compared with
//! what poppler's `pdftotext` and `pandoc` made of them (committed in
//! `ref/`); structure, metadata and paging; hostile documents ending one call;
//! retrieval over a session's workspace.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use toolhost_e2e::*;

fn fixtures() -> PathBuf {
    repo_root().join("tests/fixtures/docs")
}

/// A server with `doc` and a session `s` whose workspace holds the fixtures.
fn server_with_docs() -> Server {
    let s = Server::start(PluginsDir::new().add("doc", "doc"));
    let ws = workspace(&s, "s");
    for entry in std::fs::read_dir(fixtures()).unwrap().flatten() {
        if entry.path().is_file() {
            std::fs::copy(entry.path(), ws.join(entry.file_name())).unwrap();
        }
    }
    s
}

fn workspace(s: &Server, session: &str) -> PathBuf {
    let ws = s.data.path().join("data/workspaces").join(session);
    std::fs::create_dir_all(&ws).unwrap();
    ws
}

/// Words of a text, lower-cased, hyphenation at line ends undone.
fn words(text: &str) -> Vec<String> {
    let text = text.replace("-\n", "");
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// F1 of the two bags of words (1.0: the same words, as often).
fn word_f1(a: &str, b: &str) -> f64 {
    let count = |t: &str| {
        let mut m: HashMap<String, usize> = HashMap::new();
        for w in words(t) {
            *m.entry(w).or_default() += 1;
        }
        m
    };
    let (ca, cb) = (count(a), count(b));
    let common: usize = ca
        .iter()
        .map(|(w, n)| (*n).min(*cb.get(w).unwrap_or(&0)))
        .sum();
    let total: usize = ca.values().sum::<usize>() + cb.values().sum::<usize>();
    2.0 * common as f64 / total.max(1) as f64
}

/// The whole text of a document, read window by window through `next_offset`.
fn read_all(s: &Server, path: &str, max_chars: usize) -> (Value, String) {
    let mut offset = 0;
    let mut text = String::new();
    let mut first = Value::Null;
    for _ in 0..1000 {
        let (code, body) = s.invoke_in(
            "s",
            "doc_parser",
            json!({"path": path, "offset": offset, "max_chars": max_chars}),
        );
        assert_eq!(code, 200, "{path}: {body}");
        let r = &body["result"];
        for section in r["sections"].as_array().unwrap() {
            text += section["text"].as_str().unwrap();
        }
        if first.is_null() {
            first = r.clone();
        }
        match r["next_offset"].as_u64() {
            Some(n) => {
                assert!(n as usize > offset, "{body}");
                offset = n as usize;
            }
            None => return (first, text),
        }
    }
    panic!("{path}: paging never ended");
}

#[test]
fn documents_read_as_their_anchors_read_them() {
    let s = server_with_docs();
    let reference = |name: &str, anchor: &str| {
        std::fs::read_to_string(fixtures().join(format!("ref/{name}.{anchor}.txt"))).unwrap()
    };
    let mut report = Vec::new();
    for entry in std::fs::read_dir(fixtures()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let anchor = match Path::new(&name).extension().and_then(|e| e.to_str()) {
            Some("pdf") => "pdftotext",
            Some("docx") if !name.starts_with("par-") => "pandoc",
            _ => continue,
        };
        let (first, ours) = read_all(&s, &name, 200_000);
        let theirs = reference(&name, anchor);
        let f1 = word_f1(&ours, &theirs);
        report.push(format!("{name}: {f1:.3}"));
        // userv-overview.pdf is a diagram: words in boxes, no reading order.
        let floor = if name == "userv-overview.pdf" {
            0.9
        } else {
            0.95
        };
        assert!(f1 >= floor, "{name}: word F1 {f1:.3} against {anchor}");
        if anchor == "pdftotext" {
            // pdftotext ends every page with a form feed.
            let pages = theirs.matches('\u{c}').count();
            assert_eq!(first["count"], pages, "{name}");
            assert_eq!(first["format"], "pdf");
        }
    }
    assert_eq!(report.len(), 13, "{report:?}");
    eprintln!("word F1 against the anchors: {}", report.join(", "));
}

/// The numbers of the sections of a `doc_parser` result.
fn section_numbers(result: &Value) -> Vec<u64> {
    result["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["number"].as_u64().unwrap())
        .collect()
}

/// A server with `doc` under its shipped manifest changed by `edit`, and
/// session `session`'s workspace holding `files` (name, text).
fn doc_server_with(
    edit: impl Fn(String) -> String,
    session: &str,
    files: &[(&str, &str)],
) -> (Server, PathBuf) {
    let (_, toml) = component("doc");
    let manifest = edit(std::fs::read_to_string(toml.unwrap()).unwrap());
    let s = Server::start(
        PluginsDir::new()
            .add("doc", "doc")
            .write("doc.toml", manifest),
    );
    let ws = workspace(&s, session);
    for (name, text) in files {
        std::fs::write(ws.join(name), text).unwrap();
    }
    (s, ws)
}

#[test]
fn structure_metadata_pages_and_paging() {
    let s = server_with_docs();
    // Excel: each sheet a Markdown table, dates as dates.
    let (code, body) = s.invoke_in("s", "doc_parser", json!({"path": "ubuntu.xlsx"}));
    assert_eq!(code, 200, "{body}");
    let sheet = &body["result"]["sections"][0];
    assert_eq!(
        (&sheet["kind"], &sheet["title"]),
        (&json!("sheet"), &json!("ubuntu"))
    );
    let text = sheet["text"].as_str().unwrap();
    assert!(text.contains("| version | codename | series |"), "{text}");
    assert!(
        text.contains("| Warty Warthog | warty | 2004-03-05 |"),
        "{text}"
    );
    // PowerPoint: slides in order, with their text.
    let (_, body) = s.invoke_in(
        "s",
        "doc_parser",
        json!({"path": "tutorial.pptx", "pages": "2-3"}),
    );
    let r = &body["result"];
    assert_eq!(r["count"], 8, "{body}");
    let numbers = section_numbers(r);
    assert_eq!(numbers, [2, 3]);
    assert_eq!(r["sections"][0]["kind"], "slide");
    // A PowerPoint table.
    let (_, body) = s.invoke_in("s", "doc_parser", json!({"path": "tbl-cell.pptx"}));
    assert!(
        body["result"]["sections"][0]["text"]
            .as_str()
            .unwrap()
            .contains("| having custom margins |"),
        "{body}"
    );
    // Word: headings by style.
    let (_, body) = s.invoke_in("s", "doc_parser", json!({"path": "par-known-styles.docx"}));
    assert!(
        body["result"]["sections"][0]["text"]
            .as_str()
            .unwrap()
            .contains("# Heading 1"),
        "{body}"
    );
    // PDF: page ranges, metadata.
    let (_, body) = s.invoke_in(
        "s",
        "doc_parser",
        json!({"path": "blktrace.pdf", "pages": "3,5-6"}),
    );
    let r = &body["result"];
    let numbers = section_numbers(r);
    assert_eq!(numbers, [3, 5, 6], "{body}");
    assert_eq!(r["metadata"]["producer"], "xdvipdfmx (20181012)", "{body}");
    // Small windows give back exactly the text of one big one.
    let (_, whole) = read_all(&s, "cvs-paper.pdf", 200_000);
    let (_, paged) = read_all(&s, "cvs-paper.pdf", 2_000);
    assert_eq!(whole, paged);
    // Base64 in, the same as the file.
    let b64 = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        std::fs::read(fixtures().join("how-to-use.docx")).unwrap(),
    );
    let (code, body) = s.invoke_in("s", "doc_parser", json!({"base64": b64}));
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["result"]["format"], "docx");
    // The caller's mistakes.
    for bad in [
        json!({}),
        json!({"path": "blktrace.pdf", "url": "http://x/"}),
        json!({"path": "blktrace.pdf", "pages": "0-2"}),
        json!({"path": "blktrace.pdf", "pages": "99-"}),
        json!({"path": "how-to-use.docx", "pages": "1"}),
        json!({"path": "../../etc/passwd"}),
        json!({"path": "missing.pdf"}),
        json!({"path": "cvs-paper.pdf", "offset": 10_000_000}),
    ] {
        let (code, body) = s.invoke_in("s", "doc_parser", bad.clone());
        assert_eq!((code, kind(&body)), (422, "invalid_input"), "{bad}: {body}");
    }
}

/// A ZIP holding `word/document.xml` of `size` zero bytes, made by Python's
/// zipfile (deflate); with `lie`, the sizes in its headers say 100 bytes.
fn zip_bomb(dir: &Path, size: usize, lie: bool) -> Vec<u8> {
    let out = dir.join("bomb.docx");
    let script = format!(
        "import zipfile,sys\n\
         with zipfile.ZipFile(sys.argv[1],'w',zipfile.ZIP_DEFLATED) as z:\n\
         \x20   z.writestr('[Content_Types].xml','<Types/>')\n\
         \x20   z.writestr('word/document.xml',b'<w:document>'+b'\\0'*{size})\n"
    );
    let ok = std::process::Command::new("python3")
        .args(["-c", &script])
        .arg(&out)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let mut bytes = std::fs::read(&out).unwrap();
    if lie {
        // Uncompressed size: local header offset 22, central directory entry 24.
        let real = (size as u32 + 12).to_le_bytes();
        let mut i = 0;
        while i + 4 <= bytes.len() {
            if bytes[i..i + 4] == real {
                bytes[i..i + 4].copy_from_slice(&100u32.to_le_bytes());
            }
            i += 1;
        }
    }
    bytes
}

#[test]
fn hostile_documents_end_one_call_and_nothing_else() {
    let s = server_with_docs();
    let ws = workspace(&s, "s");
    let good = || {
        let (code, body) = s.invoke_in(
            "s",
            "doc_parser",
            json!({"path": "tutorial.pdf", "pages": "1"}),
        );
        assert_eq!(code, 200, "a good call after a bad one: {body}");
    };
    let expect = |params: Value, code: u16, words: &str| {
        let (c, body) = s.invoke_in("s", "doc_parser", params.clone());
        let message = body.to_string();
        assert_eq!(c, code, "{params}: {message}");
        assert!(message.contains(words), "{params}: {message}");
        good();
    };
    // A truncated PDF.
    let pdf = std::fs::read(fixtures().join("cvs-paper.pdf")).unwrap();
    std::fs::write(ws.join("cut.pdf"), &pdf[..pdf.len() / 3]).unwrap();
    let (code, body) = s.invoke_in("s", "doc_parser", json!({"path": "cut.pdf"}));
    assert!(code == 422 || code == 200, "{body}");
    good();
    // Noise named .pdf, a legacy .doc.
    std::fs::write(
        ws.join("noise.pdf"),
        (0..4096u32)
            .map(|i| (i * 7919 % 251) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    expect(json!({"path": "noise.pdf"}), 422, "not a pdf document");
    let mut doc = vec![0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1];
    doc.resize(2048, 0);
    std::fs::write(ws.join("old.doc"), doc).unwrap();
    expect(json!({"path": "old.doc"}), 422, "legacy binary Office");
    // ZIP bombs dressed as DOCX: honest headers (refused before inflating) and
    // lying ones (stopped while inflating).
    std::fs::write(ws.join("bomb.docx"), zip_bomb(&ws, 400 << 20, false)).unwrap();
    expect(json!({"path": "bomb.docx"}), 422, "ZIP bomb");
    std::fs::write(ws.join("liar.docx"), zip_bomb(&ws, 400 << 20, true)).unwrap();
    let (code, body) = s.invoke_in("s", "doc_parser", json!({"path": "liar.docx"}));
    assert_eq!(code, 422, "{body}");
    good();
    // 50 MB of HTML: refused before it is read.
    let page = format!(
        "<html><body>{}</body></html>",
        "<p>filler text</p>".repeat(50 << 20 >> 4)
    );
    std::fs::write(ws.join("huge.html"), page).unwrap();
    expect(json!({"path": "huge.html"}), 422, "documents up to 32 MB");
    // A URL outside the allow-list (the manifest allows none).
    let (code, body) = s.invoke_in(
        "s",
        "doc_parser",
        json!({"url": "http://127.0.0.1:9/x.pdf"}),
    );
    assert_ne!(code, 200);
    assert!(body.to_string().contains("allow-list"), "{body}");
    good();
    assert!(s.get("/health").0 == 200);
}

#[test]
fn retrieval_searches_the_sessions_documents() {
    let s = server_with_docs();
    let ws = workspace(&s, "s");
    std::fs::create_dir_all(ws.join("notes")).unwrap();
    std::fs::write(
        ws.join("notes/zh.md"),
        "# 笔记\n\n机器学习是人工智能的一个分支，研究计算机如何从数据中学习。",
    )
    .unwrap();
    let search = |params: Value| {
        let (code, body) = s.invoke_in("s", "doc_retrieval", params);
        assert_eq!(code, 200, "{body}");
        body["result"].clone()
    };
    let r = search(json!({"query": "replay captured block IO traces on a device"}));
    assert_eq!(r["mode"], "keyword");
    assert!(r["note"].is_null(), "{r}");
    assert_eq!(r["results"][0]["file"], "btreplay.pdf", "{r}");
    assert!(r["results"][0]["page"].as_u64().unwrap() >= 1, "{r}");
    let indexed = r["index"]["updated"].as_array().unwrap().len();
    assert!(indexed >= 18, "{r}");
    assert_eq!(r["index"]["files"], indexed);
    // CJK.
    let r = search(json!({"query": "人工智能", "top_k": 1}));
    assert_eq!(r["results"][0]["file"], "notes/zh.md", "{r}");
    // Incremental: nothing changed, nothing parsed; a changed file alone.
    assert_eq!(r["index"]["updated"], json!([]), "{r}");
    std::fs::write(ws.join("notes/zh.md"), "# 笔记\n\n深度学习使用神经网络。").unwrap();
    let r = search(json!({"query": "神经网络", "files": ["notes"]}));
    assert_eq!(r["index"]["updated"], json!(["notes/zh.md"]), "{r}");
    assert_eq!(r["results"].as_array().unwrap().len(), 1, "{r}");
    // The index keeps the host's workspace token of its last look
    // (`toolhost:workspace/changes`): while it is the same, the files are
    // not looked at. Files made, moved and removed by another process are
    // still seen by the very next search (the token moved on).
    let state = || -> Value {
        serde_json::from_slice(&std::fs::read(ws.join(".index/doc/state.json")).unwrap()).unwrap()
    };
    let token = state()["seen"].clone();
    assert!(token.is_string(), "{}", state());
    search(json!({"query": "神经网络"}));
    assert_eq!(state()["seen"], token, "nothing visible written");
    std::fs::create_dir_all(ws.join("new/deep")).unwrap();
    std::fs::write(ws.join("new/deep/kiwi.md"), "kiwifruit orchards").unwrap();
    let r = search(json!({"query": "kiwifruit"}));
    assert_eq!(r["index"]["updated"], json!(["new/deep/kiwi.md"]), "{r}");
    assert_eq!(r["results"][0]["file"], "new/deep/kiwi.md", "{r}");
    assert_ne!(state()["seen"], token);
    std::fs::rename(ws.join("new/deep/kiwi.md"), ws.join("kiwi.txt")).unwrap();
    let r = search(json!({"query": "kiwifruit"}));
    assert_eq!(r["index"]["removed"], json!(["new/deep/kiwi.md"]), "{r}");
    assert_eq!(r["results"][0]["file"], "kiwi.txt", "{r}");
    std::fs::remove_file(ws.join("kiwi.txt")).unwrap();
    let r = search(json!({"query": "kiwifruit"}));
    assert_eq!(r["index"]["removed"], json!(["kiwi.txt"]), "{r}");
    assert_eq!(r["results"], json!([]), "{r}");
    // Vector search asked for without embeddings: keyword, and said so.
    let r = search(json!({"query": "xmlformat configuration file", "mode": "hybrid"}));
    assert_eq!(r["mode"], "keyword");
    assert!(
        r["note"].as_str().unwrap().contains("no embedding model"),
        "{r}"
    );
    // Another session has its own (empty) index.
    let (_, body) = s.invoke_in("other", "doc_retrieval", json!({"query": "cvs"}));
    assert_eq!(body["result"]["results"], json!([]), "{body}");
}

/// A vector for `text` from its words, hashed into 64 dimensions: texts
/// sharing words point the same way. Enough to test the plumbing of vector
/// and hybrid search; no meaning is claimed.
fn hashed_embedding(text: &str) -> Vec<f64> {
    let mut v = vec![0.0; 64];
    for w in words(text) {
        let h = w.bytes().fold(0xcbf29ce484222325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
        });
        v[(h % 64) as usize] += 1.0;
    }
    v
}

#[test]
fn vector_and_hybrid_search_through_an_embeddings_endpoint() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use toolhost_e2e::fake::{Answer, Fake, ok};

    let failing = Arc::new(AtomicBool::new(false));
    let fail = failing.clone();
    // An OpenAI-compatible `POST /v1/embeddings` on 127.0.0.1.
    let endpoint = Fake::start(move |seen| {
        if fail.load(Ordering::SeqCst) {
            return Answer::Full {
                status: 500,
                content_type: "text/plain",
                body: b"overloaded".to_vec(),
            };
        }
        let request: Value = serde_json::from_slice(&seen.body).unwrap_or_default();
        let data: Vec<Value> = request["input"]
            .as_array()
            .map(|inputs| {
                inputs
                    .iter()
                    .enumerate()
                    .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": hashed_embedding(t.as_str().unwrap_or(""))}))
                    .collect()
            })
            .unwrap_or_default();
        ok(
            "application/json",
            json!({"object": "list", "data": data, "model": request["model"]}).to_string(),
        )
    });
    let (s, ws) = doc_server_with(
        |manifest| {
            manifest
                .replace(
                    "[config]\n",
                    &format!(
                        "[config]\nembeddings_url = \"{}\"\nembeddings_model = \"hashed-64\"\n",
                        endpoint.url("/v1/embeddings")
                    ),
                )
                .replace(
                    "allow = []",
                    &format!("allow = [\"127.0.0.1:{}\"]", endpoint.port),
                )
        },
        "v",
        &[
            (
                "cats.md",
                "# Cats\n\nCats purr and sleep in the sun all day.",
            ),
            ("dogs.txt", "Dogs bark at the mailman and fetch sticks."),
            ("fish.txt", "Fish swim in the pond."),
        ],
    );
    let search = |params: Value| {
        let (code, body) = s.invoke_in("v", "doc_retrieval", params);
        assert_eq!(code, 200, "{body}");
        body["result"].clone()
    };
    let r = search(json!({"query": "cats sleep in the sun", "mode": "vector"}));
    assert_eq!(r["mode"], "vector", "{r}");
    assert_eq!(r["results"][0]["file"], "cats.md", "{r}");
    let score = r["results"][0]["score"].as_f64().unwrap();
    assert!(score > 0.5 && score <= 1.0, "a cosine: {r}");
    // Documents were embedded once (one request per file), the query once.
    let seen = endpoint.seen();
    assert!(
        seen.iter()
            .all(|s| s.method == "POST" && s.target == "/v1/embeddings")
    );
    assert_eq!(seen.len(), 4, "{seen:?}");
    let r = search(json!({"query": "dogs bark"}));
    assert_eq!(r["mode"], "hybrid", "the default with embeddings: {r}");
    assert_eq!(r["results"][0]["file"], "dogs.txt", "{r}");
    assert_eq!(endpoint.hits(), 5, "only the query was embedded");
    // The endpoint failing: keyword results, and the note says why.
    failing.store(true, Ordering::SeqCst);
    let r = search(json!({"query": "fish pond", "mode": "vector"}));
    assert_eq!(r["mode"], "keyword", "{r}");
    assert!(r["note"].as_str().unwrap().contains("HTTP 500"), "{r}");
    assert_eq!(r["results"][0]["file"], "fish.txt", "{r}");
    // A file indexed while the endpoint fails: parsed, listed as failed to
    // embed, found by keyword, its vectors pending ...
    std::fs::write(ws.join("birds.txt"), "Birds sing at dawn.").unwrap();
    let r = search(json!({"query": "birds", "mode": "hybrid"}));
    assert_eq!(r["index"]["failed"][0]["file"], "birds.txt", "{r}");
    assert!(
        r["index"]["failed"][0]["error"]
            .as_str()
            .unwrap()
            .starts_with("embeddings: "),
        "{r}"
    );
    assert_eq!(r["index"]["pending_vectors"], 1, "{r}");
    assert_eq!(r["mode"], "keyword", "hybrid waits for every vector: {r}");
    assert!(
        r["note"].as_str().unwrap().contains("hybrid search waits"),
        "{r}"
    );
    assert_eq!(r["results"][0]["file"], "birds.txt", "{r}");
    // ... and embedded once the endpoint is back, without parsing it again.
    failing.store(false, Ordering::SeqCst);
    let r = search(json!({"query": "birds sing", "mode": "vector"}));
    assert_eq!(r["index"]["updated"], json!([]), "{r}");
    assert_eq!(r["index"]["failed"], json!([]), "{r}");
    assert_eq!(r["index"]["pending_vectors"], 0, "{r}");
    assert_eq!(r["results"][0]["file"], "birds.txt", "{r}");
}

/// The local embedding model's files (all-MiniLM-L6-v2 from PyPI, put
/// beside the plugins by `make plugins`), or `None` outside CI without them.
fn local_model() -> Option<PathBuf> {
    let model = repo_root().join("target/plugins/.models/all-minilm-l6-v2");
    if !model.join("model.safetensors").is_file() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no embedding model in {} (make plugins fetches it)",
            model.display()
        );
        eprintln!("skipped: no embedding model (make plugins fetches it)");
        return None;
    }
    Some(model)
}

fn with_local_model(model: &Path) -> impl Fn(String) -> String {
    let dir = model.display().to_string();
    move |manifest: String| {
        manifest.replace(
            "dir = \".models/all-minilm-l6-v2\"",
            &format!("dir = \"{dir}\""),
        )
    }
}

/// The local model makes the vectors it made when
/// `tests/fixtures/embeddings/reference.json` was recorded (by
/// candle-transformers' BERT, the plugin's encoder since being its own;
/// `record.py` beside it): each text alone in a
/// workspace, its one vector read from the index doc_retrieval keeps,
/// within cosine 0.9999 of the reference's and of unit length.
#[test]
fn the_local_model_makes_the_reference_vectors() {
    let Some(model) = local_model() else {
        return;
    };
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("tests/fixtures/embeddings/reference.json"))
            .unwrap(),
    )
    .unwrap();
    let texts = reference["texts"].as_array().unwrap();
    assert_eq!(texts.len(), 4);
    let (s, _) = doc_server_with(with_local_model(&model), "unused", &[]);
    for entry in texts {
        let file = entry["file"].as_str().unwrap();
        let session = file.split('.').next().unwrap();
        let ws = workspace(&s, session);
        std::fs::write(ws.join(file), entry["text"].as_str().unwrap()).unwrap();
        let mut pending = 1;
        while pending > 0 {
            let (code, body) = s.invoke_in(
                session,
                "doc_retrieval",
                json!({"query": "x", "mode": "hybrid"}),
            );
            assert_eq!(code, 200, "{body}");
            pending = body["result"]["index"]["pending_vectors"].as_u64().unwrap();
        }
        let blob = std::fs::read(ws.join(".index/doc/vectors.bin")).unwrap();
        let word = |at: usize| u32::from_le_bytes(blob[at..at + 4].try_into().unwrap()) as usize;
        let (n, dims) = (word(4), word(8));
        assert_eq!((n, dims), (1, 384), "{file}: one chunk, 384 dimensions");
        let got: Vec<f64> = blob[12..12 + 4 * dims]
            .chunks(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()) as f64)
            .collect();
        let want: Vec<f64> = entry["vector"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        let cosine = dot(&got, &want) / (dot(&got, &got) * dot(&want, &want)).sqrt();
        assert!(cosine >= 0.9999, "{file}: cosine {cosine} to the reference");
        assert!(
            (dot(&got, &got) - 1.0).abs() < 1e-4,
            "{file}: not unit length"
        );
    }
}

/// The local model found by meaning what shares no word with the query.
#[test]
fn the_local_model_finds_by_meaning() {
    let Some(model) = local_model() else {
        return;
    };
    let (s, _ws) = doc_server_with(
        with_local_model(&model),
        "m",
        &[
            ("cats.md", "Cats purr and sleep in the sun all afternoon."),
            (
                "money.txt",
                "The central bank raised interest rates to fight inflation.",
            ),
            (
                "code.txt",
                "Compile the program with cargo build and run the tests.",
            ),
        ],
    );
    let (code, body) = s.invoke_in(
        "m",
        "doc_retrieval",
        json!({"query": "a kitten napping in warm daylight", "mode": "vector"}),
    );
    assert_eq!(code, 200, "{body}");
    let r = &body["result"];
    assert_eq!(r["mode"], "vector", "{r}");
    assert_eq!(r["index"]["pending_vectors"], 0, "{r}");
    assert_eq!(r["results"][0]["file"], "cats.md", "{r}");
    // Keyword search finds nothing: no word is shared.
    let (_, body) = s.invoke_in(
        "m",
        "doc_retrieval",
        json!({"query": "a kitten napping in warm daylight", "mode": "keyword"}),
    );
    assert_eq!(body["result"]["results"], json!([]), "{body}");
    // Hybrid, the default with a model: the monetary question goes to the bank.
    let (_, body) = s.invoke_in(
        "m",
        "doc_retrieval",
        json!({"query": "what did the federal reserve do about prices"}),
    );
    assert_eq!(body["result"]["mode"], "hybrid", "{body}");
    assert_eq!(body["result"]["results"][0]["file"], "money.txt", "{body}");
}
