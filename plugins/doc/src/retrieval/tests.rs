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

#[test]
fn damaged_index_is_a_clear_error() {
    assert!(Postings::decode(b"junk".to_vec()).is_err());
    let mut b = Postings::encode(
        &["a".into()],
        &[(0, 0, 3)],
        &BTreeMap::from([("x".into(), vec![(0, 1)])]),
    );
    b.truncate(b.len() - 3);
    assert!(Postings::decode(b).is_err());
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
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keyword.bin");
    std::fs::write(&path, &bytes).unwrap();
    let opened = Postings::open(&path).unwrap();
    let decoded = Postings::decode(bytes.clone()).unwrap();
    for q in [
        &["cat".to_owned()][..],
        &["dog".to_owned(), "cat".to_owned()],
    ] {
        let a = opened.bm25(q, |_| true, 10).unwrap();
        let b = decoded.bm25(q, |_| true, 10).unwrap();
        assert_eq!(a, b);
        assert!(!a.is_empty());
    }
    // A file shorter than its postings is refused when opened.
    std::fs::write(&path, &bytes[..bytes.len() - 4]).unwrap();
    assert!(Postings::open(&path).is_err());
    // A term whose postings would lie past the end: refused when opened.
    let mut bad = bytes.clone();
    let count_at = bad.windows(3).position(|w| w == b"cat").unwrap() + 3 + 4;
    bad[count_at..count_at + 4].copy_from_slice(&1_000_000u32.to_le_bytes());
    assert!(Postings::decode(bad).is_err());
    // An index of the earlier format is rebuilt, not read.
    std::fs::write(&path, b"THKW\0\0\0\0").unwrap();
    assert!(Postings::open(&path).is_err());
    assert!(!keyword_current(dir.path()));
    std::fs::write(&path, &bytes).unwrap();
    assert!(keyword_current(dir.path()));
}
