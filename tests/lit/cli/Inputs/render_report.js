// Runs the scripts of a kiln profile report (report.html) against a minimal
// DOM and prints what they rendered, so that a lit test can check the report
// works without a browser: "ok <id> <bytes> svg|table" per section, or the
// exception that stopped it.
const fs = require("fs");
const vm = require("vm");
const html = fs.readFileSync(process.argv[2], "utf8");
const data = /<script id="data" type="application\/json">([\s\S]*?)<\/script>/.exec(html);
const main = /<script>([\s\S]*?)<\/script>/.exec(html);
if (!data || !main) { console.log("error: scripts not found"); process.exit(1); }
const elements = {data: {textContent: data[1]}};
const document = {getElementById: id => (elements[id] = elements[id] || {innerHTML: ""})};
try {
  vm.runInNewContext(main[1], {document, JSON, Math, String, Set});
} catch (e) {
  console.log("error: " + e);
  process.exit(1);
}
for (const id of ["summary", "timeline", "legend", "roofline", "table"]) {
  const h = (elements[id] || {}).innerHTML || "";
  console.log(`ok ${id} ${h.length} ${h.includes("<svg") ? "svg" : h.includes("<table") ? "table" : "text"}`);
}
