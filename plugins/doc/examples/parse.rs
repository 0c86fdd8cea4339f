//! `cargo run -p doc --example parse -- FILE [--json]`: the parser natively,
//! for looking at its output beside another converter's.

fn main() {
    let mut args = std::env::args().skip(1);
    let file = args.next().expect("usage: parse FILE [--json]");
    let json = args.next().is_some_and(|a| a == "--json");
    let path = std::path::Path::new(&file);
    let root = path.parent().unwrap_or(std::path::Path::new("."));
    let name = path.file_name().unwrap().to_string_lossy();
    let source = doc::load(root, Some(&name), None, None).unwrap_or_else(|e| panic!("{e:?}"));
    let (format, parsed) =
        doc::parse_source(&source, None, &Default::default()).unwrap_or_else(|e| panic!("{e:?}"));
    if json {
        println!("{format:?} {:?}", parsed.metadata);
    }
    for s in parsed.sections {
        println!("{}", s.text);
    }
}
