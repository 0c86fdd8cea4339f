//! The shipped `image` plugin (#23 part 5) over the real binary: every tool
//! on a real image in a session workspace, results read back from the
//! workspace, and untrusted bytes (a decompression bomb, a truncated PNG,
//! garbage, a URL outside the allow-list) ending their own call with a clear
//! error while other calls go on.

use base64::Engine;
use serde_json::{Value, json};
use toolhost_e2e::xagent::XAgent;
use toolhost_e2e::*;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// tests/fixtures/images/gradient.png: 160×160 RGB, CC0 (see its LICENSE).
fn gradient() -> Vec<u8> {
    std::fs::read(repo_root().join("tests/fixtures/images/gradient.png")).expect("fixture")
}

/// A PNG's width and height, from its IHDR.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let word = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (word(16), word(20))
}

/// A PNG whose IHDR declares `w`×`h` 8-bit RGBA pixels, with correct CRCs
/// and a few bytes of IDAT: a decompression bomb as a decoder first sees it.
fn png_header(w: u32, h: u32) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in bytes {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 == 1 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
        }
        !c
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut chunk = |kind: &[u8], data: &[u8]| {
        out.extend((data.len() as u32).to_be_bytes());
        let body: Vec<u8> = kind.iter().chain(data).copied().collect();
        out.extend(&body);
        out.extend(crc32(&body).to_be_bytes());
    };
    let ihdr: Vec<u8> = w
        .to_be_bytes()
        .into_iter()
        .chain(h.to_be_bytes())
        .chain([8, 6, 0, 0, 0])
        .collect();
    chunk(b"IHDR", &ihdr);
    chunk(
        b"IDAT",
        &[
            0x78, 0x01, 0x01, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x01,
        ],
    );
    chunk(b"IEND", &[]);
    out
}

/// A workspace file's bytes, through XAgent's `/download_file`.
fn download(x: &XAgent, path: &str) -> Vec<u8> {
    let r = x
        .http
        .post(x.s.url("/download_file"))
        .header("cookie", &x.cookie)
        .json(&json!({"file_path": path}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "download {path}");
    r.bytes().unwrap().to_vec()
}

/// A successful image answer: its JSON item, and the image item's bytes,
/// checked to be the file written at `output_path`.
fn image_answer(x: &XAgent, status: u16, body: &Value) -> (Value, Vec<u8>) {
    assert_eq!(status, 200, "{body}");
    let items = body["result"].as_array().expect("[json, binary]");
    assert_eq!(items.len(), 2, "{body}");
    assert_eq!(items[0]["type"], "json");
    assert_eq!(items[1]["type"], "binary");
    let meta = items[0]["json"].clone();
    assert_eq!(items[1]["media_type"], meta["media_type"]);
    let bytes = B64.decode(items[1]["data"].as_str().unwrap()).unwrap();
    assert_eq!(bytes.len() as u64, meta["bytes"].as_u64().unwrap());
    let path = meta["output_path"].as_str().unwrap();
    assert_eq!(download(x, path), bytes, "{path} holds the image answered");
    (meta, bytes)
}

#[test]
fn every_tool_on_a_real_image() {
    let s = Server::start(PluginsDir::new().add("image", "image"));
    let x = XAgent::connect(&s);
    assert_eq!(x.upload("photos/gradient.png", gradient()), 200);
    let call = |tool: &str, params: Value| s.invoke_in(x.session(), tool, params);

    let (code, body) = call("image_info", json!({"path": "photos/gradient.png"}));
    assert_eq!(code, 200, "{body}");
    let info = &body["result"];
    assert_eq!(
        (&info["format"], &info["width"], &info["height"]),
        (&json!("png"), &json!(160), &json!(160)),
        "{body}"
    );
    assert_eq!(info["bytes"], gradient().len());

    let (code, body) = call(
        "image_resize",
        json!({"path": "photos/gradient.png", "width": 64}),
    );
    let (meta, png) = image_answer(&x, code, &body);
    assert_eq!(meta["output_path"], "photos/gradient.resize.png");
    assert_eq!(png_size(&png), (64, 64));

    let (code, body) = call(
        "image_crop",
        json!({"path": "photos/gradient.png", "x": 100, "y": 20, "width": 100, "height": 30}),
    );
    let (meta, png) = image_answer(&x, code, &body);
    assert_eq!(
        meta["box"],
        json!({"x": 100, "y": 20, "width": 60, "height": 30})
    );
    assert_eq!(png_size(&png), (60, 30));

    // Qwen-Agent's zoom-in: a box in 0-1000 relative coordinates.
    let (code, body) = call(
        "image_zoom_in",
        json!({"path": "photos/gradient.png", "bbox_2d": [250, 250, 750, 750], "label": "centre"}),
    );
    let (meta, png) = image_answer(&x, code, &body);
    assert_eq!(
        (&meta["box"], &meta["label"]),
        (&json!([40, 40, 120, 120]), &json!("centre"))
    );
    assert_eq!(png_size(&png), (512, 512), "80×80 scaled up to 512×512");

    let (code, body) = call(
        "image_rotate",
        json!({"path": "photos/gradient.png", "degrees": 90, "output": "turned/g.png"}),
    );
    let (meta, _) = image_answer(&x, code, &body);
    assert_eq!(meta["output_path"], "turned/g.png");

    for (format, magic) in [
        ("jpeg", &b"\xff\xd8\xff"[..]),
        ("webp", b"RIFF"),
        ("gif", b"GIF8"),
    ] {
        let (code, body) = call(
            "image_convert",
            json!({"path": "photos/gradient.png", "format": format}),
        );
        let (meta, bytes) = image_answer(&x, code, &body);
        assert_eq!(meta["format"], format);
        assert!(bytes.starts_with(magic), "{format}");
    }

    // Seed 004's answer.
    let (code, body) = call(
        "image_compress",
        json!({"path": "photos/gradient.png", "quality": 40}),
    );
    let (meta, jpeg) = image_answer(&x, code, &body);
    assert_eq!(meta["output_path"], "photos/gradient.compressed.jpg");
    assert_eq!(meta["original_size"], gradient().len());
    assert_eq!(meta["compressed_size"], jpeg.len());
    let ratio = meta["compression_ratio"].as_f64().unwrap();
    let want = gradient().len() as f64 / jpeg.len() as f64;
    assert!((ratio - want).abs() < 0.001, "{meta}");
}

/// Peak signal-to-noise ratio of `b` against `a` (both decoded), dB.
fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let rgb = |bytes: &[u8]| image::load_from_memory(bytes).expect("an image").to_rgb8();
    let (a, b) = (rgb(a), rgb(b));
    assert_eq!(a.dimensions(), b.dimensions());
    let se: f64 = a
        .as_raw()
        .iter()
        .zip(b.as_raw())
        .map(|(&x, &y)| (f64::from(x) - f64::from(y)).powi(2))
        .sum();
    10.0 * (255.0f64.powi(2) / (se / a.as_raw().len() as f64)).log10()
}

/// JPEG to JPEG is written from the file's coefficients, in the sandbox's
/// build of that code (wasm SIMD): libjpeg's progressive files (chroma whole,
/// so halved on the way; chroma halved) and its baseline one come out
/// smaller, the picture kept.
#[test]
fn a_jpeg_is_compressed_from_its_coefficients() {
    let s = Server::start(PluginsDir::new().add("image", "image"));
    let x = XAgent::connect(&s);
    for name in [
        "card-444-progressive.jpg",
        "card-420-progressive.jpg",
        "card-420.jpg",
    ] {
        let file = std::fs::read(repo_root().join("tests/fixtures/images").join(name)).unwrap();
        assert_eq!(x.upload(name, file.clone()), 200);
        let (code, body) = s.invoke_in(
            x.session(),
            "image_compress",
            json!({"path": name, "quality": 60}),
        );
        let (meta, jpeg) = image_answer(&x, code, &body);
        assert_eq!(
            (&meta["width"], &meta["height"]),
            (&json!(157), &json!(115))
        );
        assert!(
            jpeg.len() < file.len() * 3 / 4,
            "{name}: {} of {} bytes",
            jpeg.len(),
            file.len()
        );
        let db = psnr(&file, &jpeg);
        // The native build gives 34.1 dB (444) and 36.6 dB: the same code.
        assert!(db > 32.0, "{name}: {db:.2} dB");
    }
}

#[test]
fn base64_input_is_written_under_images() {
    let s = Server::start(PluginsDir::new().add("image", "image"));
    let x = XAgent::connect(&s);
    let (code, body) = s.invoke_in(
        x.session(),
        "image_resize",
        json!({"base64": format!("data:image/png;base64,{}", B64.encode(gradient())), "scale": 0.25}),
    );
    let (meta, png) = image_answer(&x, code, &body);
    let path = meta["output_path"].as_str().unwrap();
    assert!(
        path.starts_with("images/resize-") && path.ends_with(".png"),
        "{path}"
    );
    assert_eq!(png_size(&png), (40, 40));
    assert_eq!(meta["source"]["path"], Value::Null);
}

#[test]
fn bad_images_end_their_own_call_only() {
    let s = Server::start(PluginsDir::new().add("image", "image"));
    let x = XAgent::connect(&s);
    let bomb = png_header(100_000, 100_000);
    assert_eq!(x.upload("bomb.png", bomb.clone()), 200);
    assert_eq!(x.upload("good.png", gradient()), 200);
    let good = gradient();
    assert_eq!(x.upload("cut.png", good[..good.len() / 2].to_vec()), 200);
    let session = x.session().to_owned();

    // The bomb and a good call at once: the bomb is refused from its header,
    // the good call is answered.
    let (bombed, fine) = std::thread::scope(|scope| {
        let bombed = scope.spawn(|| {
            s.invoke_in(
                &session,
                "image_resize",
                json!({"path": "bomb.png", "width": 10}),
            )
        });
        let fine = scope.spawn(|| {
            s.invoke_in(
                &session,
                "image_resize",
                json!({"path": "good.png", "width": 10}),
            )
        });
        (bombed.join().unwrap(), fine.join().unwrap())
    });
    let (code, body) = bombed;
    assert_eq!((code, kind(&body)), (422, "invalid_input"), "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("100000×100000") && message.contains("before decoding"),
        "{message}"
    );
    let (code, body) = fine;
    assert_eq!(code, 200, "{body}");
    // The same bomb as base64.
    let (code, body) = s.invoke_in(&session, "image_info", json!({"base64": B64.encode(&bomb)}));
    assert_eq!((code, kind(&body)), (422, "invalid_input"), "{body}");

    // A truncated PNG, garbage, bad base64.
    let (code, body) = s.invoke_in(
        &session,
        "image_rotate",
        json!({"path": "cut.png", "degrees": 90}),
    );
    assert_eq!((code, kind(&body)), (422, "invalid_input"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("truncated"),
        "{body}"
    );
    let (code, body) = s.invoke_in(
        &session,
        "image_convert",
        json!({"base64": B64.encode(b"just some text"), "format": "png"}),
    );
    assert_eq!((code, kind(&body)), (422, "invalid_input"), "{body}");
    let (code, body) = s.invoke_in(&session, "image_info", json!({"base64": "%%% not base64"}));
    assert_eq!((code, kind(&body)), (422, "invalid_input"), "{body}");

    // A URL outside the allow-list (the shipped manifest allows none): the
    // caller's error, naming the allow-list, before any connection.
    let (code, body) = s.invoke_in(
        &session,
        "image_info",
        json!({"url": "http://127.0.0.1:9/cat.png"}),
    );
    assert_eq!((code, kind(&body)), (422, "invalid_input"), "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("allow-list"),
        "{body}"
    );

    // A call whose fuel runs out ends with the limit error; the next is fine.
    let (code, body) = s.invoke_in_limited(
        &session,
        "image_resize",
        json!({"path": "good.png", "width": 20}),
        json!({"fuel": 5_000_000}),
    );
    assert_eq!((code, kind(&body)), (500, "out_of_fuel"), "{body}");
    let (code, body) = s.invoke_in(
        &session,
        "image_resize",
        json!({"path": "good.png", "width": 20}),
    );
    let (_, png) = image_answer(&x, code, &body);
    assert_eq!(png_size(&png), (20, 20));
    assert_eq!(s.get("/health").0, 200);
}
