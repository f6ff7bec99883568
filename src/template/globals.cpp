// The globals of transformers' chat-template environment: raise_exception, strftime_now,
// namespace (TemplateNamespace) and dict (TemplateDict), plus jinja2's range and joiner.
#include <ctime>

#include "template/builtins.h"

namespace rapid::jinja {

namespace {

// dict(*args, **kwargs) as Python builds it: a mapping or an iterable of pairs, then keywords.
Value build_dict(Interpreter& in, CallArgs& a) {
  Value d = Value::new_dict();
  if (a.pos.size() > 1) throw_type("dict expected at most 1 argument, got " + std::to_string(a.pos.size()));
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    if (src.is_dict()) {
      d.dict->items = src.dict->items;
    } else if (src.is_object() && dynamic_cast<Namespace*>(src.obj.get())) {
      d.dict->items = static_cast<Namespace*>(src.obj.get())->attrs.items;
    } else {
      for (auto& pair : in.iterate(src)) {
        std::vector<Value> kv = in.iterate(pair);
        if (kv.size() != 2) throw_type("dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required");
        d.dict->set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, v] : a.kw) d.dict->set(k, v);
  return d;
}

}  // namespace

void install_globals(Frame& g) {
  g.set("raise_exception", make_function("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
          auto m = a.take(0, "message");
          throw TemplateError(TemplateError::Kind::Raised, m ? to_str(*m) : std::string());
        }));
  g.set("strftime_now", make_function("strftime_now", [](Interpreter& in, CallArgs& a) -> Value {
          auto f = a.take(0, "format");
          if (!f || !f->is_string()) throw_type("strftime_now() argument must be str");
          if (f->s.size() > 1024) throw TemplateError(TemplateError::Kind::Limit, "strftime format too long");
          std::string out(f->s.size() * 32 + 64, '\0');
          std::tm tm = in.now();
          size_t n = f->s.empty() ? 0 : std::strftime(out.data(), out.size(), f->s.c_str(), &tm);
          out.resize(n);
          return Value::string(out);
        }));
  g.set("namespace", make_function("namespace", [](Interpreter& in, CallArgs& a) -> Value {
          Value d = build_dict(in, a);
          auto ns = std::make_shared<Namespace>();
          for (auto& [k, v] : d.dict->items) {
            if (!k.is_string()) throw_type("keywords must be strings");
            ns->set_attr(k.s, v);
          }
          in.track(ns);
          return Value::object(ns);
        }));
  g.set("dict", make_function("dict", [](Interpreter& in, CallArgs& a) -> Value { return build_dict(in, a); }));
  g.set("range", make_function("range", [](Interpreter& in, CallArgs& a) -> Value {
          for (auto& v : a.pos)
            if (!v.is_int()) throw_type("'" + v.type_name() + "' object cannot be interpreted as an integer");
          int64_t start = 0, stop = 0, step = 1;
          if (a.pos.size() == 1) stop = a.pos[0].as_int();
          else if (a.pos.size() == 2 || a.pos.size() == 3) {
            start = a.pos[0].as_int();
            stop = a.pos[1].as_int();
            if (a.pos.size() == 3) step = a.pos[2].as_int();
          } else {
            throw_type("range expected 1 to 3 arguments, got " + std::to_string(a.pos.size()));
          }
          if (step == 0) throw TemplateError(TemplateError::Kind::Type, "range() arg 3 must not be zero");
          __int128 span = step > 0 ? (__int128)stop - start : (__int128)start - stop;
          __int128 len = span <= 0 ? 0 : (span + (step > 0 ? step : -step) - 1) / (step > 0 ? step : -step);
          if (len > static_cast<__int128>(in.limits().max_range))
            throw TemplateError(TemplateError::Kind::Security,
                                "Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                                    std::to_string(in.limits().max_range) + ").");
          List out;
          out.reserve(static_cast<size_t>(len));
          for (int64_t k = 0; k < static_cast<int64_t>(len); ++k) out.push_back(Value::integer(start + k * step));
          return Value::new_list(std::move(out));
        }));
  g.set("joiner", make_function("joiner", [](Interpreter&, CallArgs& a) -> Value {
          auto s = a.take(0, "sep");
          std::string sep = s ? to_str(*s) : ", ";
          auto used = std::make_shared<bool>(false);
          return make_function("joiner", [sep, used](Interpreter&, CallArgs&) -> Value {
            if (!*used) {
              *used = true;
              return Value::string("");
            }
            return Value::string(sep);
          });
        }));
}

}  // namespace rapid::jinja
