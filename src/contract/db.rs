//! The database half of the contract (issue 20): the data every framework
//! reads and writes, the `queries` parameter's rules, and the fortunes page,
//! as TechEmpower's test rules specified them, so its clients and rules
//! carry over.
//!
//! - `world(id int primary key, randomnumber int)`: exactly [`WORLD_ROWS`]
//!   rows, ids 1 to 10,000, random numbers 1 to 10,000.
//! - `fortune(id int primary key, message text)`: [`FORTUNES`], the 12
//!   published rows (a `<script>` row, a Japanese row, rows with an em
//!   dash and an apostrophe), to which every request adds [`ADDED_FORTUNE`]
//!   with id 0 before sorting by message.
//!
//! Pure functions: nothing here talks to a database.

use rand::Rng;

/// Rows of `world`.
pub const WORLD_ROWS: u32 = 10_000;
/// Largest `randomnumber` (the smallest is 1).
pub const MAX_RANDOM_NUMBER: u32 = 10_000;
/// Most rows one `queries` or `updates` request asks for.
pub const MAX_QUERIES: u16 = 500;

/// The `fortune` table: TechEmpower's published rows, verbatim.
pub const FORTUNES: [(i32, &str); 12] = [
    (1, "fortune: No such file or directory"),
    (
        2,
        "A computer scientist is someone who fixes things that aren't broken.",
    ),
    (3, "After enough decimal places, nobody gives a damn."),
    (
        4,
        "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1",
    ),
    (
        5,
        "A computer program does what you tell it to do, not what you want it to do.",
    ),
    (
        6,
        "Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen",
    ),
    (7, "Any program that runs right is obsolete."),
    (
        8,
        "A list is only as strong as its weakest link. — Donald Knuth",
    ),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (
        11,
        "<script>alert(\"This should not be displayed in a browser alert box.\");</script>",
    ),
    (12, "フレームワークのベンチマーク"),
];

/// The row a fortunes handler adds at request time (id 0).
pub const ADDED_FORTUNE: &str = "Additional fortune added at request time.";

/// Path of the `db` scenario.
pub const DB_PATH: &str = "/db";
/// Path of the `queries` scenario (before its `?queries=N`).
pub const QUERIES_PATH: &str = "/queries";
/// Path of the `fortunes` scenario.
pub const FORTUNES_PATH: &str = "/fortunes";
/// Path of the `updates` scenario (before its `?queries=N`).
pub const UPDATES_PATH: &str = "/updates";
/// The query parameter of `queries` and `updates` (TechEmpower's name).
pub const QUERIES_PARAM: &str = "queries";

/// The database's name.
pub const DB_NAME: &str = "hello_world";
/// The user frameworks connect as (TechEmpower's, so its code carries over).
pub const DB_USER: &str = "benchmarkdbuser";
/// That user's password.
pub const DB_PASSWORD: &str = "benchmarkdbpass";
/// The port PostgreSQL listens on.
pub const DB_PORT: u16 = 5432;

/// Environment variable holding the database's IP address.
pub const DB_HOST_ENV: &str = "FAIRGROUND_DB_HOST";
/// Environment variable holding [`DB_PORT`].
pub const DB_PORT_ENV: &str = "FAIRGROUND_DB_PORT";
/// Environment variable holding [`DB_NAME`].
pub const DB_NAME_ENV: &str = "FAIRGROUND_DB_NAME";
/// Environment variable holding [`DB_USER`].
pub const DB_USER_ENV: &str = "FAIRGROUND_DB_USER";
/// Environment variable holding [`DB_PASSWORD`].
pub const DB_PASSWORD_ENV: &str = "FAIRGROUND_DB_PASSWORD";
/// Environment variable holding the whole address as a URL,
/// `postgres://USER:PASSWORD@HOST:PORT/NAME`.
pub const DB_URL_ENV: &str = "FAIRGROUND_DB_URL";
/// Environment variable holding the connection pool size a framework
/// should open (the profile's `database.pool`).
pub const DB_POOL_ENV: &str = "FAIRGROUND_DB_POOL";

/// The environment a framework reaches the database with, at `host`,
/// pooling `pool` connections.
pub fn env(host: &str, pool: u32) -> Vec<(&'static str, String)> {
    vec![
        (DB_HOST_ENV, host.to_string()),
        (DB_PORT_ENV, DB_PORT.to_string()),
        (DB_NAME_ENV, DB_NAME.to_string()),
        (DB_USER_ENV, DB_USER.to_string()),
        (DB_PASSWORD_ENV, DB_PASSWORD.to_string()),
        (
            DB_URL_ENV,
            format!("postgres://{DB_USER}:{DB_PASSWORD}@{host}:{DB_PORT}/{DB_NAME}"),
        ),
        (DB_POOL_ENV, pool.to_string()),
    ]
}

/// How many rows a `queries` or `updates` request for `path` (with its
/// query string) asks for, by [`queries_count`]'s rules.
pub fn count_in_path(path: &str) -> u16 {
    let raw = path.split_once('?').and_then(|(_, q)| {
        q.split('&')
            .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
            .find(|(k, _)| *k == QUERIES_PARAM)
            .map(|(_, v)| v)
    });
    queries_count(raw)
}

/// The `?queries=` values TechEmpower's verifier sends besides numbers in
/// range, and the rows each must be answered with.
pub const EDGE_COUNTS: [(&str, u16); 5] = [
    ("0", 1),
    ("foo", 1),
    ("", 1),
    ("-3", 1),
    ("501", MAX_QUERIES),
];

/// `PATH?queries=N`.
pub fn queries_path(path: &str, n: u16) -> String {
    format!("{path}?{QUERIES_PARAM}={n}")
}

/// The `world` rows of a `db` (`count` `None`: one object) or `queries` /
/// `updates` answer (an array of exactly `count`), each with an `id` from
/// 1 to [`WORLD_ROWS`] and a `randomNumber` from 1 to
/// [`MAX_RANDOM_NUMBER`], as `(id, randomNumber)`.
pub fn check_world(body: &[u8], count: Option<u16>) -> Result<Vec<(u32, u32)>, String> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        format!(
            "body is not JSON ({e}): {}",
            super::quote(&String::from_utf8_lossy(body))
        )
    })?;
    let items: Vec<&serde_json::Value> = match (count, &value) {
        (None, serde_json::Value::Object(_)) => vec![&value],
        (None, _) => return Err(format!("expected one JSON object, got {}", kind(&value))),
        (Some(n), serde_json::Value::Array(a)) if a.len() == usize::from(n) => a.iter().collect(),
        (Some(n), serde_json::Value::Array(a)) => {
            return Err(format!("an array of {} rows, expected {n}", a.len()))
        }
        (Some(n), _) => {
            return Err(format!(
                "expected an array of {n} rows, got {}",
                kind(&value)
            ))
        }
    };
    items
        .into_iter()
        .map(|item| {
            let obj = item
                .as_object()
                .ok_or_else(|| format!("a row is {}, not an object", kind(item)))?;
            let field = |name: &str, max: u32| -> Result<u32, String> {
                let v = obj
                    .get(name)
                    .ok_or_else(|| format!("a row has no `{name}`: {item}"))?;
                v.as_u64()
                    .filter(|n| (1..=u64::from(max)).contains(n))
                    .map(|n| n as u32)
                    .ok_or_else(|| format!("`{name}` is {v}, expected an integer from 1 to {max}"))
            };
            if obj.len() != 2 {
                return Err(format!(
                    "a row has {} fields, expected exactly `id` and `randomNumber`: {item}",
                    obj.len()
                ));
            }
            Ok((
                field("id", WORLD_ROWS)?,
                field("randomNumber", MAX_RANDOM_NUMBER)?,
            ))
        })
        .collect()
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The JSON of `world` rows as every framework writes them.
pub fn world_json(rows: &[(u32, u32)], single: bool) -> String {
    let row = |(id, n): &(u32, u32)| format!("{{\"id\":{id},\"randomNumber\":{n}}}");
    if single {
        rows.first().map(row).unwrap_or_default()
    } else {
        let parts: Vec<String> = rows.iter().map(row).collect();
        format!("[{}]", parts.join(","))
    }
}

/// Content type of the fortunes page.
pub const FORTUNES_CONTENT_TYPE: &str = "text/html; charset=utf-8";

/// How many rows `?queries=RAW` asks for: a missing, empty or non-numeric
/// value, or one below 1, is 1; above [`MAX_QUERIES`] is [`MAX_QUERIES`].
pub fn queries_count(raw: Option<&str>) -> u16 {
    match raw.map(str::trim).and_then(|s| s.parse::<i64>().ok()) {
        Some(n) if n > i64::from(MAX_QUERIES) => MAX_QUERIES,
        Some(n) if n >= 1 => n as u16,
        _ => 1,
    }
}

/// A `world` id, uniformly from 1 to [`WORLD_ROWS`].
pub fn random_world_id(rng: &mut impl Rng) -> u32 {
    rng.random_range(1..=WORLD_ROWS)
}

/// A `randomnumber`, uniformly from 1 to [`MAX_RANDOM_NUMBER`].
pub fn random_number(rng: &mut impl Rng) -> u32 {
    rng.random_range(1..=MAX_RANDOM_NUMBER)
}

/// The SQL that creates and fills both tables from nothing, in one
/// transaction: `world`'s numbers drawn by PostgreSQL's `random()` when it
/// runs (so every seeding differs and no framework can know them in
/// advance), the fortunes verbatim, and `pg_stat_statements` created.
pub fn seed_sql() -> String {
    let mut sql = format!(
        "BEGIN;\n\
         CREATE EXTENSION IF NOT EXISTS pg_stat_statements;\n\
         DROP TABLE IF EXISTS world;\n\
         DROP TABLE IF EXISTS fortune;\n\
         CREATE TABLE world (id integer PRIMARY KEY, randomnumber integer NOT NULL);\n\
         CREATE TABLE fortune (id integer PRIMARY KEY, message text NOT NULL);\n\
         INSERT INTO world (id, randomnumber) \
         SELECT i, 1 + floor(random() * {MAX_RANDOM_NUMBER})::integer \
         FROM generate_series(1, {WORLD_ROWS}) AS i;\n\
         INSERT INTO fortune (id, message) VALUES\n"
    );
    let rows: Vec<String> = FORTUNES
        .iter()
        .map(|(id, m)| format!("({id},'{}')", m.replace('\'', "''")))
        .collect();
    sql.push_str(&rows.join(",\n"));
    sql.push_str(";\n");
    sql.push_str(&role_sql());
    sql.push_str("COMMIT;\nANALYZE world;\nANALYZE fortune;\n");
    sql
}

/// The framework's role, [`DB_USER`]: an ordinary login that may read both
/// tables and update `world`, and nothing more. Not a superuser, owns no
/// table, function or database, cannot create in `public` nor make
/// temporary objects, so no stored function can turn one round trip into
/// many counted statements.
fn role_sql() -> String {
    format!(
        "CREATE ROLE {DB_USER} LOGIN PASSWORD '{DB_PASSWORD}' NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;\n\
         REVOKE ALL ON SCHEMA public FROM PUBLIC;\n\
         GRANT USAGE ON SCHEMA public TO {DB_USER};\n\
         REVOKE TEMPORARY ON DATABASE {DB_NAME} FROM PUBLIC;\n\
         GRANT CONNECT ON DATABASE {DB_NAME} TO {DB_USER};\n\
         GRANT SELECT, UPDATE ON world TO {DB_USER};\n\
         GRANT SELECT ON fortune TO {DB_USER};\n"
    )
}

/// Every fortune a page must show: the table's rows and the added one,
/// sorted by message (byte order, as TechEmpower's reference did).
pub fn expected_fortunes() -> Vec<(i32, String)> {
    let mut rows: Vec<(i32, String)> = FORTUNES
        .iter()
        .map(|(id, m)| (*id, m.to_string()))
        .collect();
    rows.push((0, ADDED_FORTUNE.to_string()));
    rows.sort_by(|a, b| a.1.cmp(&b.1));
    rows
}

/// `s` escaped for HTML text: `& < > " '`.
fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The fortunes page as TechEmpower specified it: a table of id and
/// message, one row per fortune, every message escaped.
pub fn fortunes_page(rows: &[(i32, String)]) -> String {
    let mut page = String::from(
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>\
         <tr><th>id</th><th>message</th></tr>",
    );
    for (id, message) in rows {
        page.push_str(&format!(
            "<tr><td>{id}</td><td>{}</td></tr>",
            html_escape(message)
        ));
    }
    page.push_str("</table></body></html>");
    page
}

/// `s` with the character references a page may use decoded: the named
/// ones HTML escaping produces, and decimal and hexadecimal ones.
fn html_unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let end = tail
            .find(';')
            .ok_or_else(|| format!("an `&` that starts no character reference: {tail:.20}"))?;
        let name = &tail[1..end];
        let c = match name {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = if let Some(hex) = name.strip_prefix("#x").or(name.strip_prefix("#X")) {
                    u32::from_str_radix(hex, 16).ok()
                } else if let Some(dec) = name.strip_prefix('#') {
                    dec.parse().ok()
                } else {
                    None
                };
                code.and_then(char::from_u32)
                    .ok_or_else(|| format!("unknown character reference `&{name};`"))?
            }
        };
        out.push(c);
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The rows of the first `<table>` of `page`: each `<tr>`'s `<td>` cells,
/// their text decoded. Tags are matched without regard to case or
/// attributes; rows of `<th>` cells (the header) are skipped.
fn table_rows(page: &str) -> Result<Vec<Vec<String>>, String> {
    let lower = page.to_ascii_lowercase();
    let start = lower.find("<table").ok_or("no <table>")?;
    let end = lower[start..]
        .find("</table>")
        .map(|e| start + e)
        .ok_or("no </table>")?;
    let (table, table_lower) = (&page[start..end], &lower[start..end]);
    let mut rows = Vec::new();
    for (at, _) in table_lower.match_indices("<tr") {
        let row_end = table_lower[at..]
            .find("</tr>")
            .map(|e| at + e)
            .unwrap_or(table.len());
        let (row, row_lower) = (&table[at..row_end], &table_lower[at..row_end]);
        let mut cells = Vec::new();
        for (td, _) in row_lower.match_indices("<td") {
            let open = row_lower[td..].find('>').ok_or("an unclosed <td")? + td + 1;
            let close = row_lower[open..]
                .find("</td>")
                .map(|e| open + e)
                .unwrap_or(row.len());
            cells.push(html_unescape(row[open..close].trim())?);
        }
        if !cells.is_empty() {
            rows.push(cells);
        }
    }
    Ok(rows)
}

/// Whether `page` is a true fortunes page: every fortune of the table and
/// the added one, each once, in message order, ids matching, and no
/// message's markup left unescaped (the `<script>` row shown as text).
pub fn check_fortunes(page: &str) -> Result<(), String> {
    check_fortunes_with(page, None)
}

/// [`check_fortunes`] with `added`, a row the table holds besides the
/// published ones (fairground adds one behind the server's back: a page
/// cached or built from the published rows lacks it).
pub fn check_fortunes_with(page: &str, added: Option<(i32, &str)>) -> Result<(), String> {
    if page.contains("<script>") {
        return Err("the <script> fortune is not escaped: a browser would run it".into());
    }
    if let Some((_, message)) = added {
        if message.contains('<') && page.contains(message) {
            return Err(format!(
                "the row fairground added, {}, is not escaped",
                super::quote(message)
            ));
        }
    }
    let rows = table_rows(page)?;
    let mut expected = expected_fortunes();
    if let Some((id, message)) = added {
        expected.push((id, message.to_string()));
        expected.sort_by(|a, b| a.1.cmp(&b.1));
    }
    if rows.len() != expected.len() {
        return Err(format!(
            "{} fortune rows, expected {} (the table's {} and the one added at request time)",
            rows.len(),
            expected.len(),
            expected.len() - 1
        ));
    }
    for (i, (row, (id, message))) in rows.iter().zip(&expected).enumerate() {
        let [got_id, got_message] = row.as_slice() else {
            return Err(format!(
                "row {}: {} cells, expected id and message",
                i + 1,
                row.len()
            ));
        };
        if got_id != &id.to_string() || got_message != message {
            return Err(format!(
                "row {}: id {got_id:?} message {got_message:?}, expected id {id} message {message:?} \
                 (rows sorted by message)",
                i + 1
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_follow_techempowers_rules() {
        for (raw, n) in [
            (None, 1),
            (Some(""), 1),
            (Some("foo"), 1),
            (Some("0"), 1),
            (Some("-3"), 1),
            (Some("1"), 1),
            (Some("20"), 20),
            (Some("500"), 500),
            (Some("501"), 500),
            (Some("99999999999"), 500),
        ] {
            assert_eq!(queries_count(raw), n, "{raw:?}");
        }
    }

    #[test]
    fn a_row_added_to_the_table_must_show_escaped() {
        let added = (1000, "<b>new</b> & \"x\"");
        let mut rows = expected_fortunes();
        rows.push((added.0, added.1.to_string()));
        rows.sort_by(|a, b| a.1.cmp(&b.1));
        let page = fortunes_page(&rows);
        check_fortunes_with(&page, Some(added)).unwrap();
        // The published page lacks it: a cache or a hard-coded page.
        let old = fortunes_page(&expected_fortunes());
        assert!(check_fortunes_with(&old, Some(added))
            .unwrap_err()
            .contains("13 fortune rows, expected 14"));
        // Shown raw.
        let raw = page.replace(&html_escape(added.1), added.1);
        assert!(check_fortunes_with(&raw, Some(added))
            .unwrap_err()
            .contains("not escaped"));
    }

    #[test]
    fn the_reference_page_passes_and_each_way_of_lying_fails() {
        let good = fortunes_page(&expected_fortunes());
        check_fortunes(&good).unwrap();
        // Another escaping of the same text passes too.
        check_fortunes(&good.replace("&quot;", "&#34;").replace("&#39;", "&#x27;")).unwrap();
        // Unescaped: the script would run.
        let raw = good.replace("&lt;script&gt;", "<script>");
        assert!(check_fortunes(&raw).unwrap_err().contains("not escaped"));
        // The added row missing.
        let rows: Vec<(i32, String)> = expected_fortunes()
            .into_iter()
            .filter(|(id, _)| *id != 0)
            .collect();
        assert!(check_fortunes(&fortunes_page(&rows))
            .unwrap_err()
            .contains("12 fortune rows"));
        // Sorted by id instead of message.
        let mut by_id = expected_fortunes();
        by_id.sort_by_key(|(id, _)| *id);
        assert!(check_fortunes(&fortunes_page(&by_id))
            .unwrap_err()
            .contains("sorted by message"));
    }

    #[test]
    fn the_seed_fills_both_tables_and_quotes_the_apostrophe() {
        let sql = seed_sql();
        assert!(sql.contains(&format!("generate_series(1, {WORLD_ROWS})")));
        assert_eq!(sql.matches("),\n(").count() + 1, FORTUNES.len());
        assert!(sql.contains(
            "(2,'A computer scientist is someone who fixes things that aren''t broken.')"
        ));
        assert!(sql.contains("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"));
        assert!(sql
            .contains("CREATE ROLE benchmarkdbuser LOGIN PASSWORD 'benchmarkdbpass' NOSUPERUSER"));
        assert!(sql.contains("GRANT SELECT ON fortune TO benchmarkdbuser"));
        assert!(!sql.contains("GRANT CREATE"));
    }

    #[test]
    fn world_answers_are_checked_for_shape_and_range() {
        assert_eq!(
            check_world(br#"{"id":5,"randomNumber":77}"#, None),
            Ok(vec![(5, 77)])
        );
        let two = br#"[{"id":1,"randomNumber":2},{"randomNumber":3,"id":10000}]"#;
        assert_eq!(check_world(two, Some(2)), Ok(vec![(1, 2), (10000, 3)]));
        assert!(check_world(two, Some(3))
            .unwrap_err()
            .contains("array of 2 rows, expected 3"));
        assert!(check_world(two, None)
            .unwrap_err()
            .contains("one JSON object"));
        assert!(check_world(br#"{"id":0,"randomNumber":2}"#, None)
            .unwrap_err()
            .contains("`id` is 0"));
        assert!(check_world(br#"{"id":1,"randomnumber":2}"#, None)
            .unwrap_err()
            .contains("no `randomNumber`"));
        assert!(check_world(br#"{"id":1,"randomNumber":2,"x":1}"#, None)
            .unwrap_err()
            .contains("3 fields"));
        assert!(check_world(br#"{"id":1,"randomNumber":"2"}"#, None).is_err());
        let rows = [(3, 4), (5, 6)];
        assert_eq!(
            check_world(world_json(&rows, false).as_bytes(), Some(2)),
            Ok(rows.to_vec())
        );
        assert_eq!(world_json(&rows[..1], true), r#"{"id":3,"randomNumber":4}"#);
    }

    #[test]
    fn counts_are_read_from_the_path() {
        assert_eq!(count_in_path("/queries?queries=20"), 20);
        assert_eq!(count_in_path("/queries?x=1&queries=7"), 7);
        assert_eq!(count_in_path("/queries"), 1);
        for (raw, n) in EDGE_COUNTS {
            assert_eq!(
                count_in_path(&format!("/updates?queries={raw}")),
                n,
                "{raw}"
            );
        }
    }

    #[test]
    fn the_environment_names_one_address() {
        let env = env("10.0.0.2", 16);
        let get = |k: &str| env.iter().find(|(n, _)| *n == k).unwrap().1.clone();
        assert_eq!(
            get(DB_URL_ENV),
            "postgres://benchmarkdbuser:benchmarkdbpass@10.0.0.2:5432/hello_world"
        );
        assert_eq!(get(DB_POOL_ENV), "16");
    }
}
