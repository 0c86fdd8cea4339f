//! The index over real files in a temporary workspace.

use super::*;

#[test]
fn chunks_overlap_and_cover_the_text() {
    let para = "word ".repeat(150);
    let text = format!("{para}\n\n{para}\n\n{para}");
    let chunks = split(&text);
    assert!(chunks.len() >= 3, "{}", chunks.len());
    assert!(chunks.iter().all(|c| c.chars().count() <= CHUNK));
    assert_eq!(split("short"), ["short"]);
    assert!(split("").is_empty());
}

#[test]
fn index_is_incremental_and_ranks_by_bm25() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(
        root.join("cats.md"),
        "# Cats\n\nCats purr and sleep all day.",
    )
    .unwrap();
    std::fs::write(
        root.join("dogs.txt"),
        "Dogs bark at the mailman. Dogs fetch.",
    )
    .unwrap();
    std::fs::write(root.join("zh.txt"), "机器学习是人工智能的一个分支。").unwrap();
    std::fs::write(root.join("bad.pdf"), "not a pdf at all").unwrap();
    let mut index = Index::open(root).unwrap();
    let r = index.sync(None, false).unwrap();
    assert_eq!(r.updated.len(), 4, "{r:?}");
    assert_eq!(r.failed.len(), 1, "{r:?}");
    assert_eq!(r.failed[0].file, "bad.pdf");
    let hits = index.keyword("barking dog", &Scope::new(None), 5).unwrap();
    let top = index.hits(&hits).unwrap();
    assert_eq!(top[0].file, "dogs.txt", "{top:?}");
    let zh = index.keyword("人工智能", &Scope::new(None), 5).unwrap();
    assert_eq!(index.hits(&zh).unwrap()[0].file, "zh.txt");
    // An earlier version's keyword index is rebuilt from the chunks,
    // nothing parsed again.
    std::fs::write(root.join(INDEX_DIR).join("keyword.bin"), b"THKW\0\0\0\0").unwrap();
    let mut index = Index::open(root).unwrap();
    let r = index.sync(None, false).unwrap();
    assert!(r.updated.is_empty(), "{r:?}");
    let hits = index.keyword("barking dog", &Scope::new(None), 5).unwrap();
    assert_eq!(index.hits(&hits).unwrap()[0].file, "dogs.txt");
    // Only the changed file is parsed again; a deleted one is forgotten.
    let mut index = Index::open(root).unwrap();
    let r = index.sync(None, false).unwrap();
    assert!(r.updated.is_empty(), "{r:?}");
    std::fs::write(
        root.join("cats.md"),
        "# Cats\n\nCats bark sometimes, dogs never purr.",
    )
    .unwrap();
    std::fs::remove_file(root.join("zh.txt")).unwrap();
    let r = index.sync(None, false).unwrap();
    assert_eq!(
        (r.updated.as_slice(), r.removed.as_slice()),
        (&["cats.md".to_owned()][..], &["zh.txt".to_owned()][..])
    );
    let only = index
        .keyword("bark", &Scope::new(Some(&["cats.md".to_owned()])), 5)
        .unwrap();
    assert_eq!(index.hits(&only).unwrap().len(), 1);
}

#[test]
fn fusion_rewards_agreement() {
    let fused = fuse(&[vec![(1, 9.0), (2, 5.0)], vec![(2, 0.9), (3, 0.8)]]);
    assert_eq!(fused[0].0, 2);
}

/// `bytes` as `keyword.bin` in a folder of its own, opened.
fn opened(bytes: &[u8]) -> (tempfile::TempDir, Result<Option<Postings>, ToolError>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keyword.bin");
    std::fs::write(&path, bytes).unwrap();
    let p = Postings::open(&path);
    (dir, p)
}

#[test]
fn damaged_index_is_a_clear_error() {
    assert!(opened(b"THK2junk").1.is_err());
    let mut b = Postings::encode(
        &["a".into()],
        &[(0, 0, 3)],
        &BTreeMap::from([("x".into(), vec![(0, 1)])]),
    );
    b.truncate(b.len() - 3);
    assert!(opened(&b).1.is_err());
}

#[test]
fn postings_are_read_from_the_file_term_by_term() {
    let files = vec!["a.md".to_owned(), "b.md".to_owned()];
    let chunks = [(0, 0, 4), (1, 0, 2), (1, 1, 8)];
    let terms = BTreeMap::from([
        ("cat".to_owned(), vec![(0, 2), (2, 1)]),
        ("dog".to_owned(), vec![(1, 1)]),
    ]);
    let bytes = Postings::encode(&files, &chunks, &terms);
    let (_dir, p) = opened(&bytes);
    let p = p.unwrap().unwrap();
    let ids = |q: &[&str]| -> Vec<usize> {
        let q: Vec<String> = q.iter().map(|t| t.to_string()).collect();
        p.bm25(&q, |_| true, 10)
            .unwrap()
            .into_iter()
            .map(|(c, _)| c)
            .collect()
    };
    // Each term's own postings, ranked by BM25: the shorter chunk with the
    // term twice first.
    assert_eq!(ids(&["cat"]), [0, 2]);
    assert_eq!(ids(&["dog"]), [1]);
    let mut both = ids(&["dog", "cat"]);
    both.sort();
    assert_eq!(both, [0, 1, 2]);
    assert!(ids(&["bird"]).is_empty());
    // A file shorter than its postings is refused when opened.
    assert!(opened(&bytes[..bytes.len() - 4]).1.is_err());
    // A term whose postings would lie past the end: refused when opened.
    let mut bad = bytes.clone();
    let count_at = bad.windows(3).position(|w| w == b"cat").unwrap() + 3 + 4;
    bad[count_at..count_at + 4].copy_from_slice(&1_000_000u32.to_le_bytes());
    assert!(opened(&bad).1.is_err());
    // No index, or an earlier version's: none, to be rebuilt, not read.
    assert!(opened(b"THKW\0\0\0\0").1.unwrap().is_none());
    assert!(opened(b"").1.unwrap().is_none());
    let dir = tempfile::tempdir().unwrap();
    assert!(
        Postings::open(&dir.path().join("keyword.bin"))
            .unwrap()
            .is_none()
    );
}

#[test]
fn the_best_chunks_are_ranked_as_a_full_sort_would() {
    // 300 chunks over three files; "common" in most, "rare" in a few, many
    // scores equal (ties go to the lower chunk id).
    let files: Vec<String> = (0..3).map(|f| format!("f{f}.md")).collect();
    let chunks: Vec<(u32, u32, u32)> = (0..300u32).map(|c| (c % 3, c / 3, 5 + c % 7)).collect();
    let common: Vec<(u32, u32)> = (0..300u32)
        .filter(|c| c % 4 != 0)
        .map(|c| (c, 1 + c % 3))
        .collect();
    let rare: Vec<(u32, u32)> = (0..300u32)
        .filter(|c| c % 37 == 1)
        .map(|c| (c, 2))
        .collect();
    let terms = BTreeMap::from([
        ("common".to_owned(), common.clone()),
        ("rare".to_owned(), rare.clone()),
    ]);
    let (_dir, p) = opened(&Postings::encode(&files, &chunks, &terms));
    let p = p.unwrap().unwrap();
    // The reference: every chunk's score summed, all sorted, cut.
    let avg = chunks.iter().map(|c| f64::from(c.2)).sum::<f64>() / 300.0;
    let reference = |q: &[&str], keep: &dyn Fn(usize) -> bool, want: usize| {
        let mut all: BTreeMap<usize, f64> = BTreeMap::new();
        // A term asked twice counts once.
        let q: std::collections::BTreeSet<&str> = q.iter().copied().collect();
        for t in q {
            let list = &terms[t];
            let idf = ((300.0 - list.len() as f64 + 0.5) / (list.len() as f64 + 0.5) + 1.0).ln();
            for &(c, tf) in list {
                let (tf, len) = (f64::from(tf), f64::from(chunks[c as usize].2));
                let s = idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / avg));
                *all.entry(c as usize).or_default() += s;
            }
        }
        let mut v: Vec<(usize, f64)> = all
            .into_iter()
            .filter(|&(c, _)| keep(chunks[c].0 as usize))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(want);
        v
    };
    let query = |q: &[&str]| q.iter().map(|t| t.to_string()).collect::<Vec<_>>();
    for q in [
        &["common"][..],
        &["rare"],
        &["common", "rare"],
        &["rare", "common", "rare"],
    ] {
        for want in [0, 1, 5, 20, 250, 1000] {
            let everything = |_: usize| true;
            let ours = p.bm25(&query(q), everything, want).unwrap();
            let theirs = reference(q, &everything, want);
            let ids = |v: &[(usize, f64)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
            assert_eq!(ids(&ours), ids(&theirs), "{q:?} {want}");
            for (a, b) in ours.iter().zip(&theirs) {
                assert!((a.1 - b.1).abs() < 1e-9, "{q:?} {want}: {a:?} {b:?}");
            }
            let second = |f: usize| f == 1;
            let ours = p.bm25(&query(q), second, want).unwrap();
            assert_eq!(
                ids(&ours),
                ids(&reference(q, &second, want)),
                "{q:?} {want} in f1"
            );
        }
    }
}

#[test]
fn a_hit_reads_only_its_own_chunks_of_a_file() {
    let file = FileChunks {
        path: "a.md".into(),
        chunks: (0..6)
            .map(|i| Chunk {
                page: (i % 2 == 0).then_some(i + 1),
                text: format!("chunk \"{i}\"\n\\ é"),
            })
            .collect(),
        vectors: Some("AAAA".into()),
        dims: 1,
    };
    let json = serde_json::to_vec(&file).unwrap();
    let read = |bytes: &[u8], wanted: &[usize]| {
        let wanted: std::collections::BTreeSet<usize> = wanted.iter().copied().collect();
        let mut de = serde_json::Deserializer::from_slice(bytes);
        serde::de::DeserializeSeed::deserialize(super::SomeChunks(&wanted), &mut de)
    };
    let got = read(&json, &[4, 1, 9]).unwrap();
    let want: Vec<(usize, String, Option<usize>)> = [1, 4]
        .iter()
        .map(|&i| (i, file.chunks[i].text.clone(), file.chunks[i].page))
        .collect();
    let got: Vec<(usize, String, Option<usize>)> =
        got.into_iter().map(|(i, c)| (i, c.text, c.page)).collect();
    assert_eq!(
        got, want,
        "the wanted ones, decoded; one past the end is absent"
    );
    assert!(read(&json, &[]).unwrap().is_empty());
    // Fields in any order, unknown ones skipped.
    let moved = br#"{"dims":1,"extra":[1,{"a":2}],"chunks":[{"page":null,"text":"x"},{"page":3,"text":"y"}],"path":"b"}"#;
    let got = read(moved, &[1]).unwrap();
    assert_eq!(
        (got[0].0, got[0].1.text.as_str(), got[0].1.page),
        (1, "y", Some(3))
    );
    // Damage is an error, skipped parts included.
    assert!(read(&json[..json.len() / 2], &[0]).is_err());
    assert!(read(br#"{"chunks":[{"page":1,"text":"x"}, oops]}"#, &[0]).is_err());
    assert!(read(br#"{"path":"no chunks"}"#, &[0]).is_err());
}
