//! Unit tests of the nodeset reader; tests/nodeset_oracle.rs compares it with nodeset itself.
use super::*;

fn e(s: &str) -> Vec<String> {
    expand(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[test]
fn padded_ranges_lists_steps_and_products() {
    let v = e("gpu[001-128]");
    assert_eq!(
        (v.len(), v[0].as_str(), v[127].as_str()),
        (128, "gpu001", "gpu128")
    );
    assert_eq!(e("node[1,3,5]"), ["node1", "node3", "node5"]);
    assert_eq!(e("n[1-2,7]"), ["n1", "n2", "n7"]);
    assert_eq!(
        e("rack[1-2]-node[1-2]"),
        ["rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"]
    );
    assert_eq!(e("10.0.0.[8-9]"), ["10.0.0.8", "10.0.0.9"]);
    assert_eq!(e("plain"), ["plain"]);
    assert_eq!(e("n[08-10]"), ["n08", "n09", "n10"]);
    assert_eq!(
        e("node[1-10/2]"),
        ["node1", "node3", "node5", "node7", "node9"]
    );
    assert_eq!(
        e("node[0001-1000/250]"),
        ["node0001", "node0251", "node0501", "node0751"]
    );
    assert_eq!(e("n[ 1 , 3 ]"), ["n1", "n3"]);
}

#[test]
fn lists_and_operators_combine_left_to_right() {
    assert_eq!(
        e("node[1-3],gpu[1-2]"),
        ["node1", "node2", "node3", "gpu1", "gpu2"]
    );
    assert_eq!(e("node[1-5]!node[2-4]"), ["node1", "node5"]);
    assert_eq!(e("n[1-5]&n[4-9]"), ["n4", "n5"]);
    assert_eq!(e("n[1-5]^n[3-7]"), ["n1", "n2", "n6", "n7"]);
    assert_eq!(e("x[1-3]!x2,x2"), ["x1", "x3", "x2"]);
    assert_eq!(e("n[1-3] ! n2"), ["n1", "n3"]);
    assert_eq!(e("n[1-3],n2"), ["n1", "n2", "n3"]);
    assert_eq!(e("n01,n1"), ["n01", "n1"]);
}

#[test]
fn digits_beside_a_bracket_join_its_numbers_as_nodeset_joins_them() {
    assert_eq!(e("n0[1-3]"), ["n01", "n02", "n03"]);
    assert_eq!(e("n1[9-10]").len(), 92);
    assert_eq!(e("n[1-3]0"), ["n10", "n20", "n30"]);
    assert_eq!(e("n1[1-5/2]"), ["n11", "n13", "n15"]);
    assert!(
        expand("n0[8-10]")
            .unwrap_err()
            .contains("padding length mismatch")
    );
    assert!(expand("n[1-5/2]0").unwrap_err().contains("trailing digits"));
}

#[test]
fn errors_where_nodeset_errors() {
    for (bad, says) in [
        ("gpu[1-", "not closed"),
        ("gpu[]", "empty"),
        ("gpu[a-b]", "not a number"),
        ("gpu[5-1]", "backwards"),
        ("gpu1]", "without"),
        ("n[1-2][3-4]", "reopening"),
        ("n[1-[2-3]]", "without"),
        ("n[001-10]", "padding length mismatch"),
        ("n[1-010]", "padding length mismatch"),
        ("n[1/2]", "step"),
        ("n[1-10/0]", "step is 0"),
        ("a,,b", "missing an operand"),
        ("a!", "missing an operand"),
        ("!a", "missing an operand"),
        ("n[1-3]&", "missing an operand"),
        ("n[1,,2]", "empty"),
        ("a[1-1000]b[1-1000]", "at most"),
        ("a[1-99999999999999999999]", "not a number"),
    ] {
        let err = expand(bad).unwrap_err();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn deliberate_refusals_name_the_construct() {
    assert!(expand("@rack1").unwrap_err().contains("groups.conf"));
    assert!(expand("gpu*").unwrap_err().contains("wildcard"));
    assert!(expand("n[-1-3]").unwrap_err().contains("negative"));
    assert!(expand("n[+1-3]").unwrap_err().contains("not a number"));
    assert!(expand("n\u{663}").unwrap_err().contains("non-ASCII digit"));
}

#[test]
fn combine_resolves_each_operand() {
    let terms = parse("gpu*!gpu2").unwrap();
    assert_eq!(terms.len(), 2);
    assert!(terms[0].is_glob() && terms[1].op == Op::Difference);
    let all = ["gpu1", "gpu2", "cpu1"];
    let got = combine(&terms, |t| {
        Ok(all
            .iter()
            .filter(|n| {
                t.names
                    .iter()
                    .any(|p| p == *n || p.ends_with('*') && n.starts_with(&p[..p.len() - 1]))
            })
            .map(|s| s.to_string())
            .collect())
    })
    .unwrap();
    assert_eq!(got, ["gpu1"]);
}
