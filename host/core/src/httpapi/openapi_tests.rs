//! Tests of [`super`]: specs of each version in, operations out.

use super::*;
use crate::httpapi::names::shorten;

fn all() -> Selection<'static> {
    Selection::default()
}

#[test]
fn openapi_3_parameters_body_refs_and_output() {
    let doc = parse_document(
        r##"
openapi: 3.0.3
servers: [{url: /v1}]
paths:
  /pets/{petId}:
    parameters:
      - {name: petId, in: path, schema: {type: integer}}
    put:
      operationId: updatePet
      summary: Update a pet.
      tags: [pets]
      parameters:
        - {name: dry-run, in: query, schema: {type: boolean}, description: Only check.}
        - {name: X-Trace, in: header, required: true, schema: {type: string}}
      requestBody:
        required: true
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Pet'}
      responses:
        '200':
          description: ok
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Pet'}
components:
  schemas:
    Pet:
      type: object
      required: [name]
      properties:
        name: {type: string, nullable: true}
        parent: {$ref: '#/components/schemas/Pet'}
"##,
    )
    .unwrap();
    let (ops, _) = operations(&doc, &all(), 40, false).unwrap();
    assert_eq!(ops.len(), 1);
    let op = &ops[0];
    assert_eq!((op.name.as_str(), op.method.as_str()), ("updatepet", "PUT"));
    assert_eq!(op.body.as_deref(), Some("body"));
    let s = &op.input_schema;
    assert_eq!(s["properties"]["petId"]["type"], "integer");
    assert_eq!(s["properties"]["dry-run"]["description"], "Only check.");
    assert_eq!(
        s["properties"]["body"]["properties"]["name"]["type"],
        json!(["string", "null"])
    );
    assert!(
        s["properties"]["body"]["properties"]["parent"]["description"]
            .as_str()
            .unwrap()
            .contains("recursive")
    );
    let mut required: Vec<&str> = s["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort();
    assert_eq!(required, ["X-Trace", "body", "petId"]);
    assert_eq!(
        op.output_schema.as_ref().unwrap()["required"],
        json!(["name"])
    );
    assert_eq!(
        base_url(&doc, Some("http://h:1/spec/openapi.yaml")).unwrap(),
        "http://h:1/v1"
    );
    assert!(jsonschema::validator_for(s).is_ok());
}

#[test]
fn swagger_2_quirks_and_names() {
    let doc = json!({
        "swagger": "2.0", "host": "example.org", "basePath": "/api", "schemes": ["http"],
        "paths": {
            "/status/{codes}": {"get": {"parameters": [{"name": "codes", "in": "path", "type": "int"}],
                                         "produces": ["text/plain"], "responses": {"200": {"description": "x"}}}},
            "/status/{codes}/": {"get": {"responses": {}}},
            "/form": {"post": {"parameters": [{"name": "n", "in": "formData", "type": "number",
                                                "minimum": 1, "exclusiveMinimum": true}],
                               "responses": {"200": {"description": "x", "schema": {"type": "object"}}}}}
        }
    });
    let (ops, _) = operations(&doc, &all(), 40, false).unwrap();
    let names: Vec<&str> = ops.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(
        names,
        ["post_form", "get_status_codes", "get_status_codes_2"]
    );
    assert_eq!(
        ops[1].input_schema["properties"]["codes"]["type"],
        "integer"
    );
    assert_eq!(ops[0].params[0].location, In::Form);
    assert_eq!(
        ops[0].input_schema["properties"]["n"]["exclusiveMinimum"],
        1
    );
    assert!(ops[0].output_schema.is_some());
    assert_eq!(ops[1].description, "GET /status/{codes}");
    assert_eq!(base_url(&doc, None).unwrap(), "http://example.org/api");
}

#[test]
fn selection_by_id_tag_and_path() {
    let doc = json!({"openapi": "3.1.0", "paths": {
        "/a": {"get": {"operationId": "getA", "responses": {}}},
        "/b/x": {"get": {"tags": ["bee"], "responses": {}}},
        "/c/1": {"get": {"responses": {}}},
        "/d": {"get": {"responses": {}}}
    }});
    let ids = ["getA".to_string()];
    let tags = ["bee".to_string()];
    let paths = ["/c/*".to_string()];
    let select = Selection {
        operations: &ids,
        tags: &tags,
        paths: &paths,
    };
    let names: Vec<String> = operations(&doc, &select, 40, false)
        .unwrap()
        .0
        .into_iter()
        .map(|o| o.name)
        .collect();
    assert_eq!(names, ["geta", "get_b_x", "get_c_1"]);
    // An entry the spec does not have is an error naming it, or with
    // `lenient` a warning beside what the others select.
    let none = ["nope".to_string(), "getA".to_string()];
    let nope = Selection {
        operations: &none,
        tags: &["bees".to_string()],
        ..all()
    };
    let err = operations(&doc, &nope, 40, false).unwrap_err();
    assert!(
        err.contains("[api] operations names `nope`, which the spec does not have")
            && err.contains("[api] tags names `bees`")
            && !err.contains("`getA`"),
        "{err}"
    );
    let (ops, warnings) = operations(&doc, &nope, 40, true).unwrap();
    assert_eq!(ops.len(), 1);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    let only_nope = ["nope".to_string()];
    let err = operations(
        &doc,
        &Selection {
            operations: &only_nope,
            ..all()
        },
        40,
        true,
    )
    .unwrap_err();
    assert!(err.contains("no operation"), "{err}");
}

#[test]
fn long_names_keep_their_ends_and_a_stable_hash() {
    // GitHub's: the words that tell these apart are at the end.
    let a = "actions_list_self_hosted_runners_in_group_for_org_enterprise_runner_groups";
    let b = "actions_list_self_hosted_runners_in_group_for_org_enterprise_runner_labels";
    let (sa, sb) = (shorten(a, 40), shorten(b, 40));
    assert!(sa.len() <= 40 && sb.len() <= 40, "{sa} {sb}");
    assert_ne!(sa, sb);
    assert!(
        sa.starts_with("actions_") && sa.contains("runner_groups_"),
        "{sa}"
    );
    assert!(sb.contains("runner_labels_"), "{sb}");
    // The same on every load, and names that fit are kept.
    assert_eq!(shorten(a, 40), sa);
    assert_eq!(shorten("get_user", 40), "get_user");
    // Differing only in the middle: the hash tells them apart.
    let c = "repos_get_branch_protection_required_status_checks_contexts_x";
    let d = "repos_set_branch_protection_required_status_checks_contexts_x";
    assert_ne!(shorten(c, 30), shorten(d, 30));
    // One long word.
    assert_eq!(shorten(&"w".repeat(80), 20).len(), 20);
}

#[test]
fn bad_documents_say_why() {
    let dangling = json!({"openapi": "3.0.0", "paths": {"/a": {"get": {
            "parameters": [{"$ref": "#/components/parameters/Missing"}], "responses": {}}}}});
    let err = operations(&dangling, &all(), 40, false).unwrap_err();
    assert!(
        err.contains("unresolvable $ref `#/components/parameters/Missing`"),
        "{err}"
    );
    assert!(err.starts_with("GET /a"), "{err}");
    let external = json!({"openapi": "3.0.0", "paths": {"/a": {"get": {"responses": {"200": {
            "description": "x", "content": {"application/json": {"schema": {"$ref": "other.yaml#/X"}}}}}}}}});
    assert!(
        operations(&external, &all(), 40, false)
            .unwrap_err()
            .contains("another document")
    );
    assert!(
        operations(&json!({"openapi": "4.0"}), &all(), 40, false)
            .unwrap_err()
            .contains("4.0")
    );
    assert!(
        operations(&json!({"info": {}}), &all(), 40, false)
            .unwrap_err()
            .contains("not an OpenAPI")
    );
    assert!(
        parse_document("{ nope")
            .unwrap_err()
            .contains("neither JSON")
    );
    assert_eq!(
        tool_name("get_status_codes_status__codes__get"),
        "get_status_codes_status_codes_get"
    );
    assert_eq!(tool_name("__"), "call");
    let mut taken = HashSet::new();
    let long = "abcdefghijklmnopqrstu";
    let first = unique(long, 16, &mut taken);
    assert_eq!(first.len(), 16, "{first}");
    let second = unique(long, 16, &mut taken);
    assert!(second.ends_with("_2") && second.len() <= 16, "{second}");
}

#[test]
fn references_that_fan_out_are_refused_not_expanded() {
    // Each schema names the next twice: 2^24 nodes once resolved, from a
    // spec of a few kilobytes.
    let mut schemas = serde_json::Map::new();
    for i in 0..24 {
        let next = json!({"$ref": format!("#/components/schemas/S{}", i + 1)});
        schemas.insert(
            format!("S{i}"),
            json!({"type": "object", "properties": {"a": next, "b": next}}),
        );
    }
    schemas.insert("S24".into(), json!({"type": "string"}));
    let doc = json!({"openapi": "3.0.0", "components": {"schemas": schemas}, "paths": {"/a": {"post": {
        "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}},
        "responses": {}}}}});
    assert!(doc.to_string().len() < 4096);
    let started = std::time::Instant::now();
    let err = operations(&doc, &all(), 40, false).unwrap_err();
    assert!(err.contains("fan out"), "{err}");
    assert!(err.starts_with("POST /a"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    // Eight levels (512 leaves) are fine.
    let mut small = doc.clone();
    small["components"]["schemas"]["S8"] = json!({"type": "string"});
    assert!(operations(&small, &all(), 40, false).is_ok());
}
