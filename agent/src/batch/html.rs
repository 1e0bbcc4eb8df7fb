//! The pages of a run and a sweep (`index.html`): a stylesheet, tables whose columns sort
//! when their heading is clicked, and cells that keep a number to sort by beside the text
//! they show. Self-contained: a page works from the folder, offline.

use crate::report::escape;

/// Sorts a table by the clicked column: numbers as numbers (a cell's `data-v` first, then
/// its text), missing values (`-`) last, a second click reverses.
const SORT_SCRIPT: &str = r#"
document.querySelectorAll('table.sortable th').forEach((th, i) => th.addEventListener('click', () => {
  const table = th.closest('table'), body = table.tBodies[0], rows = Array.from(body.rows);
  const asc = th.dataset.dir !== 'asc';
  table.querySelectorAll('th').forEach(h => delete h.dataset.dir);
  th.dataset.dir = asc ? 'asc' : 'desc';
  const key = r => { const c = r.cells[i], v = c.dataset.v ?? c.textContent.trim(), n = Number(v);
                     return v === '' || v === '-' ? null : (isNaN(n) ? v : n); };
  rows.sort((a, b) => { const x = key(a), y = key(b);
    if (x === null || y === null) return (x === null) - (y === null);
    const c = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
    return asc ? c : -c; });
  rows.forEach(r => body.appendChild(r));
}));
"#;

const STYLE: &str = "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}\
td:first-child,th:first-child{text-align:left}th{background:#f3f4f6}table.sortable th{cursor:pointer}\
table.sortable th[data-dir=asc]::after{content:' \\25B2'}table.sortable th[data-dir=desc]::after{content:' \\25BC'}\
td.reason{text-align:left;max-width:32em;font-size:90%}.bad{color:#b42318}.good{color:#067647}\
img{max-width:100%}";

/// A whole page: the title as heading, then `body` (HTML).
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head>\
         <body><h1>{t}</h1>\n{body}<script>{SORT_SCRIPT}</script></body></html>\n",
        t = escape(title)
    )
}

/// One table cell: the HTML it shows and, for sorting, the number it stands for.
#[derive(Debug, Clone)]
pub struct Cell {
    pub html: String,
    pub sort: Option<f64>,
    pub class: Option<&'static str>,
}

impl Cell {
    /// Text, escaped.
    pub fn text(text: &str) -> Cell {
        Cell { html: escape(text), sort: None, class: None }
    }

    /// A number shown with `digits` decimals, `-` when there is none.
    pub fn number(value: Option<f64>, digits: usize) -> Cell {
        Cell { html: crate::batch::results::fmt(value, digits), sort: value, class: None }
    }

    /// A link to `href` showing `text`.
    pub fn link(href: &str, text: &str) -> Cell {
        Cell { html: format!("<a href=\"{}\">{}</a>", escape(href), escape(text)), sort: None, class: None }
    }

    pub fn class(mut self, class: &'static str) -> Cell {
        self.class = Some(class);
        self
    }
}

/// A table; `sortable` ones sort by a click on a heading.
pub fn table(headings: &[&str], rows: Vec<Vec<Cell>>, sortable: bool) -> String {
    let mut h = format!("<table{}><thead><tr>", if sortable { " class=\"sortable\"" } else { "" });
    for heading in headings {
        h.push_str(&format!("<th>{}</th>", escape(heading)));
    }
    h.push_str("</tr></thead><tbody>\n");
    for row in rows {
        h.push_str("<tr>");
        for cell in row {
            let sort = cell.sort.filter(|v| v.is_finite()).map(|v| format!(" data-v=\"{v}\"")).unwrap_or_default();
            let class = cell.class.map(|c| format!(" class=\"{c}\"")).unwrap_or_default();
            h.push_str(&format!("<td{class}{sort}>{}</td>", cell.html));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_escape_their_text_and_keep_the_number_to_sort_by() {
        let t = table(&["part", "IoU"], vec![vec![Cell::text("<a&b>"), Cell::number(Some(0.98765), 3)]], true);
        assert!(t.contains("<td>&lt;a&amp;b&gt;</td>"), "{t}");
        assert!(t.contains("<td data-v=\"0.98765\">0.988</td>"), "{t}");
        assert!(t.starts_with("<table class=\"sortable\">"));
        let missing = table(&["IoU"], vec![vec![Cell::number(None, 3)]], false);
        assert!(missing.contains("<td>-</td>"), "{missing}");
    }
}
