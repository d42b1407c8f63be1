// Test helper: the geometry of the HTML report's inline SVG charts, checked
// in C++ on the HTML text (the report has no script, so the DOM Chromium
// dumps is the same markup). For every <svg> it reads the viewBox and the
// renderer's data-plot="left top width height" (the plot frame), and for
// every mark (rect, circle, line, text, path, polyline) its bounding box in
// SVG user units:
//   - every mark lies inside the viewBox;
//   - every data mark (an element with a data-* attribute: points, bars,
//     schedule steps, the HBM limit) lies inside the plot frame;
//   - a pipeline step or idle gap (<rect data-kind>) is at least 1.9 wide
//     (narrower ones alias into colours the legend does not have);
//   - no two <text> boxes overlap.
// Text boxes are estimated from the character count: 0.6 em per character
// (wider than the average of a sans-serif face, so the check errs on the
// side of reporting a cut-off label), 0.8 em above the baseline, 0.25 em
// below, 11 px (svg.chart's font-size) or 12 px for class="title". Only the
// transforms the renderer uses are understood (translate, rotate, scale);
// anything else is reported rather than ignored.
#ifndef MESHTUNE_TESTS_TUNER_RENDER_SVG_GEOMETRY_H_
#define MESHTUNE_TESTS_TUNER_RENDER_SVG_GEOMETRY_H_

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "tests/tuner/run_tune.h"  // MESHTUNE_PINNED_LOCAL_GPU

namespace meshtune::tuner::testing {

struct SvgBox {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
  bool Inside(const SvgBox& outer, double slack) const {
    return x0 >= outer.x0 - slack && y0 >= outer.y0 - slack &&
           x1 <= outer.x1 + slack && y1 <= outer.y1 + slack;
  }
  // Width and height of the intersection, both > 0 when they overlap.
  bool Overlaps(const SvgBox& o, double slack) const {
    return std::min(x1, o.x1) - std::max(x0, o.x0) > slack &&
           std::min(y1, o.y1) - std::max(y0, o.y0) > slack;
  }
  std::string ToString() const {
    auto f = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.1f", v);
      return std::string(buf);
    };
    return "[" + f(x0) + "," + f(y0) + " .. " + f(x1) + "," + f(y1) + "]";
  }
};

// One element's start tag: its name, attributes and (for <text>) content.
struct SvgElement {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::string text;  // <text> content, entities decoded, tags removed
  std::string tag;   // the start tag, for messages (cut at 160 characters)
  bool Has(const std::string& a) const { return attrs.count(a) > 0; }
  double Num(const std::string& a) const {
    auto it = attrs.find(a);
    return it == attrs.end() ? 0 : std::strtod(it->second.c_str(), nullptr);
  }
};

inline std::map<std::string, std::string> ParseSvgAttributes(
    const std::string& tag) {
  std::map<std::string, std::string> attrs;
  size_t i = tag.find_first_of(" \t\n/>");
  while (i < tag.size()) {
    while (i < tag.size() &&
           (std::isspace(static_cast<unsigned char>(tag[i])) || tag[i] == '/' ||
            tag[i] == '>')) {
      ++i;
    }
    const size_t name_begin = i;
    while (i < tag.size() && tag[i] != '=' &&
           !std::isspace(static_cast<unsigned char>(tag[i])) && tag[i] != '>' &&
           tag[i] != '/') {
      ++i;
    }
    const std::string name = tag.substr(name_begin, i - name_begin);
    if (name.empty()) break;
    std::string value;
    if (i < tag.size() && tag[i] == '=') {
      ++i;
      const char quote = tag[i];
      if (quote == '"' || quote == '\'') {
        const size_t end = tag.find(quote, i + 1);
        value = tag.substr(i + 1, end - i - 1);
        i = end == std::string::npos ? tag.size() : end + 1;
      } else {
        const size_t end = tag.find_first_of(" \t\n>", i);
        value = tag.substr(i, end - i);
        i = end;
      }
    }
    attrs[name] = value;
  }
  return attrs;
}

// Characters as a browser shows them: entities count one, UTF-8
// continuation bytes none.
inline size_t DisplayedLength(const std::string& text) {
  size_t n = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '&') {
      const size_t semi = text.find(';', i);
      if (semi != std::string::npos && semi - i <= 10) i = semi;
    } else if ((c & 0xC0) == 0x80) {
      continue;
    }
    ++n;
  }
  return n;
}

inline std::vector<double> Numbers(const std::string& s) {
  std::vector<double> out;
  const char* p = s.c_str();
  while (*p != '\0') {
    if (std::isdigit(static_cast<unsigned char>(*p)) || *p == '-' ||
        *p == '+' || *p == '.') {
      char* end = nullptr;
      const double v = std::strtod(p, &end);
      if (end == p) {
        ++p;
        continue;
      }
      out.push_back(v);
      p = end;
    } else {
      ++p;
    }
  }
  return out;
}

// A 2-D affine map [a c e; b d f].
struct Affine {
  double a = 1, b = 0, c = 0, d = 1, e = 0, f = 0;
  Affine Then(const Affine& m) const {  // this, then m
    return {m.a * a + m.c * b,       m.b * a + m.d * b,
            m.a * c + m.c * d,       m.b * c + m.d * d,
            m.a * e + m.c * f + m.e, m.b * e + m.d * f + m.f};
  }
  SvgBox Map(const SvgBox& box) const {
    SvgBox out{1e300, 1e300, -1e300, -1e300};
    for (const double x : {box.x0, box.x1}) {
      for (const double y : {box.y0, box.y1}) {
        const double px = a * x + c * y + e;
        const double py = b * x + d * y + f;
        out.x0 = std::min(out.x0, px);
        out.y0 = std::min(out.y0, py);
        out.x1 = std::max(out.x1, px);
        out.y1 = std::max(out.y1, py);
      }
    }
    return out;
  }
};

// The transform attribute as an affine map; false for anything else than
// translate, rotate (about the origin) and scale.
inline bool ParseTransform(const std::string& s, Affine* out) {
  Affine total;
  size_t i = 0;
  while (true) {
    while (i < s.size() &&
           (std::isspace(static_cast<unsigned char>(s[i])) || s[i] == ',')) {
      ++i;
    }
    if (i >= s.size()) break;
    const size_t open = s.find('(', i);
    const size_t close = s.find(')', i);
    if (open == std::string::npos || close == std::string::npos) return false;
    const std::string fn = s.substr(i, open - i);
    const std::vector<double> args = Numbers(s.substr(open + 1, close - open));
    Affine m;
    if (fn == "translate" && !args.empty()) {
      m.e = args[0];
      m.f = args.size() > 1 ? args[1] : 0;
    } else if (fn == "rotate" && args.size() == 1) {
      const double rad = args[0] * M_PI / 180;
      m.a = std::cos(rad);
      m.b = std::sin(rad);
      m.c = -std::sin(rad);
      m.d = std::cos(rad);
    } else if (fn == "scale" && !args.empty()) {
      m.a = args[0];
      m.d = args.size() > 1 ? args[1] : args[0];
    } else {
      return false;
    }
    // SVG applies the rightmost function first: total = total * m.
    total = m.Then(total);
    i = close + 1;
  }
  *out = total;
  return true;
}

// The points of a path's d attribute (M, L, H, V, Z; upper case absolute,
// lower case relative); false for curves and arcs.
inline bool PathPoints(const std::string& d,
                       std::vector<std::pair<double, double>>* points) {
  double x = 0, y = 0, start_x = 0, start_y = 0;
  char command = 0;
  size_t i = 0;
  while (i < d.size()) {
    const char ch = d[i];
    if (std::isspace(static_cast<unsigned char>(ch)) || ch == ',') {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(ch))) {
      command = ch;
      ++i;
      if (command == 'Z' || command == 'z') {
        x = start_x;
        y = start_y;
      } else if (std::string("MLHVmlhv").find(command) == std::string::npos) {
        return false;
      }
      continue;
    }
    char* end = nullptr;
    const double v1 = std::strtod(d.c_str() + i, &end);
    if (end == d.c_str() + i) return false;
    i = static_cast<size_t>(end - d.c_str());
    const bool rel = std::islower(static_cast<unsigned char>(command));
    const char upper =
        static_cast<char>(std::toupper(static_cast<unsigned char>(command)));
    if (upper == 'H') {
      x = rel ? x + v1 : v1;
    } else if (upper == 'V') {
      y = rel ? y + v1 : v1;
    } else if (upper == 'M' || upper == 'L') {
      while (i < d.size() &&
             (std::isspace(static_cast<unsigned char>(d[i])) || d[i] == ',')) {
        ++i;
      }
      const double v2 = std::strtod(d.c_str() + i, &end);
      if (end == d.c_str() + i) return false;
      i = static_cast<size_t>(end - d.c_str());
      x = rel ? x + v1 : v1;
      y = rel ? y + v2 : v2;
      if (upper == 'M') {
        start_x = x;
        start_y = y;
        command = rel ? 'l' : 'L';  // further pairs are line-tos
      }
    } else {
      return false;
    }
    points->push_back({x, y});
  }
  return true;
}

// The bounding box of a mark; false (with `why`) when it cannot be computed.
inline bool MarkBox(const SvgElement& el, SvgBox* box, std::string* why) {
  if (el.name == "rect") {
    *box = {el.Num("x"), el.Num("y"), el.Num("x") + el.Num("width"),
            el.Num("y") + el.Num("height")};
  } else if (el.name == "circle") {
    const double r = el.Num("r");
    *box = {el.Num("cx") - r, el.Num("cy") - r, el.Num("cx") + r,
            el.Num("cy") + r};
  } else if (el.name == "line") {
    *box = {std::min(el.Num("x1"), el.Num("x2")),
            std::min(el.Num("y1"), el.Num("y2")),
            std::max(el.Num("x1"), el.Num("x2")),
            std::max(el.Num("y1"), el.Num("y2"))};
  } else if (el.name == "polyline" || el.name == "path") {
    std::vector<std::pair<double, double>> pts;
    if (el.name == "polyline") {
      const std::vector<double> v = Numbers(
          el.attrs.count("points") ? el.attrs.at("points") : std::string());
      for (size_t k = 0; k + 1 < v.size(); k += 2)
        pts.push_back({v[k], v[k + 1]});
    } else if (!PathPoints(el.attrs.count("d") ? el.attrs.at("d") : "", &pts)) {
      *why = "path with a command other than M, L, H, V, Z";
      return false;
    }
    if (pts.empty()) {
      *box = {0, 0, 0, 0};
      return true;
    }
    *box = {1e300, 1e300, -1e300, -1e300};
    for (const auto& [x, y] : pts) {
      box->x0 = std::min(box->x0, x);
      box->y0 = std::min(box->y0, y);
      box->x1 = std::max(box->x1, x);
      box->y1 = std::max(box->y1, y);
    }
  } else if (el.name == "text") {
    const std::string cls = el.attrs.count("class") ? el.attrs.at("class") : "";
    const double em = cls.find("title") != std::string::npos ? 12.0 : 11.0;
    const double w = 0.6 * em * static_cast<double>(DisplayedLength(el.text));
    const std::string anchor =
        el.attrs.count("text-anchor") ? el.attrs.at("text-anchor") : "start";
    const double x = el.Num("x");
    const double y = el.Num("y");
    const double left =
        anchor == "end" ? x - w : (anchor == "middle" ? x - w / 2 : x);
    *box = {left, y - 0.8 * em, left + w, y + 0.25 * em};
  } else {
    *why = "unknown mark";
    return false;
  }
  if (el.Has("transform")) {
    Affine m;
    if (!ParseTransform(el.attrs.at("transform"), &m)) {
      *why = "transform the check does not understand";
      return false;
    }
    *box = m.Map(*box);
  }
  return true;
}

// The searches whose reports the geometry tests render (issue 19): GPT-3
// 175B on 1024 A100-80GB (the default GPU; 4608 pipeline steps, out-of-memory
// candidates needing many times the HBM), LLaMA-3 70B on 128 H100 (10240
// steps) and gpt-tiny on one pinned `local` CPU rank (every number tiny, the
// HBM limit 30x the memory used).
inline const char* const kGeometryReportSearches[] = {
    "--model 175b --gpus 1024 --no-db",
    "--model llama3-70b --gpus 128 --gpu h100 --no-db",
    "--model gpt-tiny --gpus 1 " MESHTUNE_PINNED_LOCAL_GPU " --no-db",
};

// Every violation of the rules at the top of this file, one line each
// ("chart ID: <tag>: why"). Empty when every chart is drawn inside itself.
inline std::vector<std::string> SvgGeometryProblems(const std::string& html) {
  std::vector<std::string> problems;
  constexpr double kSlack = 0.51;  // rounding of printed coordinates
  size_t at = 0;
  while ((at = html.find("<svg", at)) != std::string::npos) {
    const size_t tag_end = html.find('>', at);
    const size_t svg_end = html.find("</svg>", at);
    if (tag_end == std::string::npos || svg_end == std::string::npos) break;
    const auto svg_attrs = ParseSvgAttributes(html.substr(at, tag_end - at));
    const std::string id =
        svg_attrs.count("id") ? svg_attrs.at("id") : "(no id)";
    const std::vector<double> vb =
        Numbers(svg_attrs.count("viewBox") ? svg_attrs.at("viewBox") : "");
    if (vb.size() != 4) {
      problems.push_back("chart " + id + ": no viewBox");
      at = svg_end;
      continue;
    }
    const SvgBox view{vb[0], vb[1], vb[0] + vb[2], vb[1] + vb[3]};
    const std::vector<double> pa =
        Numbers(svg_attrs.count("data-plot") ? svg_attrs.at("data-plot") : "");
    const bool has_plot = pa.size() == 4;
    const SvgBox plot =
        has_plot ? SvgBox{pa[0], pa[1], pa[0] + pa[2], pa[1] + pa[3]} : view;
    if (!has_plot) problems.push_back("chart " + id + ": no data-plot");
    std::vector<std::pair<SvgBox, std::string>> texts;
    size_t i = tag_end;
    while (true) {
      i = html.find('<', i + 1);
      if (i == std::string::npos || i >= svg_end) break;
      size_t name_end = i + 1;
      while (name_end < html.size() &&
             std::isalpha(static_cast<unsigned char>(html[name_end]))) {
        ++name_end;
      }
      SvgElement el;
      el.name = html.substr(i + 1, name_end - i - 1);
      if (el.name != "rect" && el.name != "circle" && el.name != "line" &&
          el.name != "text" && el.name != "path" && el.name != "polyline") {
        continue;
      }
      const size_t end = html.find('>', i);
      el.tag = html.substr(i, std::min<size_t>(end - i + 1, 160));
      el.attrs = ParseSvgAttributes(html.substr(i, end - i));
      if (el.name == "text") {
        const size_t close = html.find("</text>", end);
        std::string raw = html.substr(end + 1, close - end - 1);
        for (size_t lt; (lt = raw.find('<')) != std::string::npos;) {
          raw.erase(lt, raw.find('>', lt) - lt + 1);
        }
        el.text = raw;
      }
      SvgBox box;
      std::string why;
      const std::string where = "chart " + id + ": " + el.tag + ": ";
      if (!MarkBox(el, &box, &why)) {
        problems.push_back(where + why);
        continue;
      }
      if (!box.Inside(view, kSlack)) {
        problems.push_back(where + "box " + box.ToString() +
                           " outside the viewBox " + view.ToString());
        continue;
      }
      bool data_mark = false;
      for (const auto& [name, value] : el.attrs) {
        data_mark |= name.rfind("data-", 0) == 0;
      }
      if (data_mark && !box.Inside(plot, kSlack)) {
        problems.push_back(where + "box " + box.ToString() +
                           " outside the plot " + plot.ToString());
      }
      if (el.name == "rect" && el.Has("data-kind") && el.Num("width") < 1.9) {
        problems.push_back(where + "narrower than 2 px");
      }
      if (el.name == "text") texts.push_back({box, el.tag + el.text});
    }
    for (size_t a = 0; a < texts.size(); ++a) {
      for (size_t b = a + 1; b < texts.size(); ++b) {
        if (texts[a].first.Overlaps(texts[b].first, kSlack)) {
          problems.push_back("chart " + id + ": text " + texts[a].second + " " +
                             texts[a].first.ToString() + " overlaps " +
                             texts[b].second + " " + texts[b].first.ToString());
        }
      }
    }
    at = svg_end;
  }
  return problems;
}

}  // namespace meshtune::tuner::testing

#endif  // MESHTUNE_TESTS_TUNER_RENDER_SVG_GEOMETRY_H_
