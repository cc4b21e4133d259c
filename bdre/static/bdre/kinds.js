// Beside each step of a registration form: the properties its chosen kind reads (key,
// default, what it is), and the same as the properties box's placeholder, so that a new user
// sees what to type. The kinds come from the page (json_script "step-kinds").
(function () {
  "use strict";
  var data = document.getElementById("step-kinds");
  if (!data) return;
  var kinds = {};
  JSON.parse(data.textContent).forEach(function (kind) { kinds[String(kind.id)] = kind; });

  function show(select) {
    var step = select.closest("fieldset");
    if (!step) return;
    var box = step.querySelector("textarea[name$='-properties']");
    var help = step.querySelector(".kind-help");
    if (!help) {
      help = document.createElement("div");
      help.className = "kind-help";
      help.setAttribute("data-testid", "kind-help");
      (box ? box.closest("label") || box : select).insertAdjacentElement("afterend", help);
    }
    var kind = kinds[select.value];
    help.textContent = "";
    if (!kind) { help.hidden = true; return; }
    help.hidden = false;
    var title = document.createElement("strong");
    title.textContent = kind.properties.length
      ? kind.name + " (" + kind.kind + ") reads:"
      : kind.name + " (" + kind.kind + ") takes no properties.";
    help.appendChild(title);
    var list = document.createElement("ul");
    var example = [];
    kind.properties.forEach(function (p) {
      var item = document.createElement("li");
      var key = document.createElement("code");
      key.textContent = p.key;
      item.appendChild(key);
      item.appendChild(document.createTextNode(
        (p.default !== null ? " (default " + p.default + ")" : " (no default)") +
        (p.help ? ": " + p.help : "")));
      list.appendChild(item);
      example.push(p.key + " = " + (p.default !== null ? p.default : "…"));
    });
    help.appendChild(list);
    if (box) box.placeholder = example.join("\n");
  }

  document.querySelectorAll("select[name$='-kind']").forEach(function (select) {
    select.addEventListener("change", function () { show(select); });
    if (select.value) show(select);
  });
})();
