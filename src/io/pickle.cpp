#include "io/pickle.h"

#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "common/error.h"

namespace sezm {

const PyValue* PyValue::find(const std::string& key) const {
  if (kind != Kind::Dict) return nullptr;
  for (const auto& [k, v] : entries)
    if (k->kind == Kind::String && k->text == key) return v;
  return nullptr;
}

std::string PyValue::describe() const {
  switch (kind) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
    case Kind::Global: return "global " + text;
    case Kind::Object: return "object " + text;
    case Kind::Storage: return "storage";
    case Kind::Tensor: return "tensor";
  }
  return "value";
}

namespace {

using Kind = PyValue::Kind;

// torch.<Name>Storage -> dtype. Element size 0 marks a dtype we cannot convert.
struct StorageType {
  const char* name;
  const char* dtype;
  size_t element_size;
};
constexpr StorageType kStorageTypes[] = {
    {"torch.FloatStorage", "float32", 4}, {"torch.DoubleStorage", "float64", 8},
    {"torch.LongStorage", "int64", 8},    {"torch.IntStorage", "int32", 4},
    {"torch.BoolStorage", "bool", 1},
};

// Opcodes (CPython Lib/pickle.py names).
enum Op : uint8_t {
  MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', BINFLOAT = 'G', BININT = 'J',
  BININT1 = 'K', BININT2 = 'M', NONE = 'N', BINPERSID = 'Q', REDUCE = 'R', BINUNICODE = 'X',
  EMPTY_LIST = ']', APPEND = 'a', BUILD = 'b', GLOBAL = 'c', DICT = 'd', APPENDS = 'e',
  BINGET = 'h', LONG_BINGET = 'j', LIST = 'l', BINPUT = 'q', LONG_BINPUT = 'r', SETITEM = 's',
  TUPLE = 't', SETITEMS = 'u', EMPTY_DICT = '}', EMPTY_TUPLE = ')', BINBYTES = 'B',
  SHORT_BINBYTES = 'C', PROTO = 0x80, NEWOBJ = 0x81, TUPLE1 = 0x85, TUPLE2 = 0x86,
  TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, SHORT_BINUNICODE = 0x8c,
  BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, STACK_GLOBAL = 0x93, MEMOIZE = 0x94, FRAME = 0x95,
};

// All values of one pickle; see pickle.h (ownership). A deque never moves its elements, so the
// pointers containers hold stay valid while it grows.
struct Arena {
  std::deque<PyValue> values;
};

// Values are mutable while the pickle is being built; readers see const PyValue.
using Val = PyValue*;

// What one pickle may hold: values, memo entries and marks together (docs/checkpoint-reader.md).
// A real checkpoint's data.pkl holds ~10 per tensor (~10^4 for a model with its optimizer
// state); each costs ~120 bytes, so this bounds the tree at ~1.2 GB even for a data.pkl that
// a deflated entry expands 1000-fold.
constexpr size_t kMaxUnits = 10000000;

class Unpickler {
 public:
  Unpickler(const std::string& bytes, const std::string& source)
      : bytes_(bytes), source_(source), arena_(std::make_shared<Arena>()) {}

  PyValuePtr run() {
    const PyValue* root = parse();
    return PyValuePtr(arena_, root);  // shares ownership of the arena, points at the root
  }

 private:
  void count() {
    if (++units_ > kMaxUnits)
      fail("more than " + std::to_string(kMaxUnits) +
           " values, memo entries and marks; not a deepmd-kit checkpoint pickle");
  }
  Val make(Kind kind) {
    count();
    PyValue& v = arena_->values.emplace_back();
    v.kind = kind;
    return &v;
  }
  Val make_text(Kind kind, std::string text) {
    Val v = make(kind);
    v->text = std::move(text);
    return v;
  }

  const PyValue* parse() {
    for (;;) {
      op_offset_ = pos_;
      const uint8_t op = u8();
      switch (op) {
        case PROTO:
          if (u8() > 5) fail("unsupported pickle protocol");
          break;
        case FRAME: take(8); break;  // framing only groups opcodes; the stream reads through
        case STOP: return pop();
        case MARK:
          count();
          marks_.push_back(stack_.size());
          break;
        case POP: pop(); break;
        case POP_MARK: pop_mark(); break;
        case DUP: push(top()); break;
        case NONE: push(make(Kind::None)); break;
        case NEWTRUE:
        case NEWFALSE: {
          Val v = make(Kind::Bool);
          v->boolean = op == NEWTRUE;
          push(v);
          break;
        }
        case BININT: {
          const uint32_t raw = u32();
          int32_t value;
          std::memcpy(&value, &raw, sizeof value);
          push_int(value);
          break;
        }
        case BININT1: push_int(u8()); break;
        case BININT2: push_int(u16()); break;
        case LONG1: push_int(long1(u8())); break;
        case BINFLOAT: {
          uint64_t raw = 0;  // big-endian IEEE double
          for (int i = 0; i < 8; ++i) raw = (raw << 8) | u8();
          Val v = make(Kind::Float);
          std::memcpy(&v->real, &raw, sizeof raw);
          push(v);
          break;
        }
        case BINUNICODE: push_text(Kind::String, u32()); break;
        case SHORT_BINUNICODE: push_text(Kind::String, u8()); break;
        case BINUNICODE8: push_text(Kind::String, u64()); break;
        case BINBYTES: push_text(Kind::Bytes, u32()); break;
        case SHORT_BINBYTES: push_text(Kind::Bytes, u8()); break;
        case BINBYTES8: push_text(Kind::Bytes, u64()); break;
        case EMPTY_LIST: push(make(Kind::List)); break;
        case EMPTY_TUPLE: push(make(Kind::Tuple)); break;
        case EMPTY_DICT: push(make(Kind::Dict)); break;
        case LIST: push(sequence(Kind::List, pop_mark())); break;
        case TUPLE: push(sequence(Kind::Tuple, pop_mark())); break;
        case TUPLE1:
        case TUPLE2:
        case TUPLE3: {
          const size_t n = op - TUPLE1 + 1;
          if (stack_.size() < n + stack_floor()) fail("stack underflow");
          std::vector<Val> items(stack_.end() - static_cast<long>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          push(sequence(Kind::Tuple, std::move(items)));
          break;
        }
        case DICT: {
          Val dict = make(Kind::Dict);
          set_items(*dict, pop_mark());
          push(dict);
          break;
        }
        case SETITEM: {
          Val value = pop();
          Val key = pop();
          set_items(expect_top(Kind::Dict, "SETITEM"), {key, value});
          break;
        }
        case SETITEMS: {
          auto items = pop_mark();
          set_items(expect_top(Kind::Dict, "SETITEMS"), std::move(items));
          break;
        }
        case APPEND: {
          Val value = pop();
          expect_top(Kind::List, "APPEND").items.push_back(value);
          break;
        }
        case APPENDS: {
          auto items = pop_mark();
          auto& list = expect_top(Kind::List, "APPENDS").items;
          list.insert(list.end(), items.begin(), items.end());
          break;
        }
        case BINPUT: memo_put(u8()); break;
        case LONG_BINPUT: memo_put(u32()); break;
        case MEMOIZE: memo_put(memo_.size()); break;
        case BINGET: push(memo_get(u8())); break;
        case LONG_BINGET: push(memo_get(u32())); break;
        case GLOBAL: {
          std::string module = line();
          push(make_text(Kind::Global, module + "." + line()));
          break;
        }
        case STACK_GLOBAL: {
          Val name = pop();
          Val module = pop();
          if (!name->is(Kind::String) || !module->is(Kind::String))
            fail("STACK_GLOBAL needs two strings");
          push(make_text(Kind::Global, module->text + "." + name->text));
          break;
        }
        case REDUCE: {
          Val args = pop();
          Val callable = pop();
          if (!args->is(Kind::Tuple)) fail("REDUCE arguments are a " + args->describe());
          push(reduce(*callable, *args));
          break;
        }
        case NEWOBJ: {
          pop();  // constructor arguments: opaque objects keep nothing
          Val cls = pop();
          push(make_text(Kind::Object, cls->text));
          break;
        }
        case BUILD:
          // The state of an object (e.g. the _metadata attribute torch attaches to state-dict
          // OrderedDicts, or an optimizer's __dict__) is never needed here.
          pop();
          top();
          break;
        case BINPERSID: push(persistent(*pop())); break;
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(std::string("unknown or unsupported opcode ") + hex);
        }
      }
    }
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw Error(source_ + ": bad pickle: " + why + " (opcode at byte offset " +
                std::to_string(op_offset_) + ")");
  }

  const char* take(uint64_t n) {
    if (n > bytes_.size() - pos_)
      fail("truncated: " + std::to_string(n) + " more bytes needed, " +
           std::to_string(bytes_.size() - pos_) + " left");
    const char* p = bytes_.data() + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  uint64_t little_endian(size_t n) {
    const auto* p = reinterpret_cast<const unsigned char*>(take(n));
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
    return v;
  }
  uint8_t u8() { return static_cast<uint8_t>(little_endian(1)); }
  uint16_t u16() { return static_cast<uint16_t>(little_endian(2)); }
  uint32_t u32() { return static_cast<uint32_t>(little_endian(4)); }
  uint64_t u64() { return little_endian(8); }

  // LONG1: n-byte little-endian two's complement.
  int64_t long1(size_t n) {
    if (n > 8) fail("integer wider than 64 bits");
    if (n == 0) return 0;
    uint64_t raw = little_endian(n);
    if (n < 8 && (raw >> (8 * n - 1)) & 1) raw |= ~uint64_t{0} << (8 * n);  // sign-extend
    int64_t value;
    std::memcpy(&value, &raw, sizeof value);
    return value;
  }

  std::string line() {
    const size_t end = bytes_.find('\n', pos_);
    if (end == std::string::npos) fail("truncated: unterminated GLOBAL name");
    std::string s = bytes_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }

  void push(Val v) { stack_.push_back(v); }
  void push_int(int64_t i) {
    Val v = make(Kind::Int);
    v->integer = i;
    push(v);
  }
  void push_text(Kind kind, uint64_t n) {
    const char* p = take(n);
    push(make_text(kind, std::string(p, static_cast<size_t>(n))));
  }

  // Values below the innermost MARK belong to an enclosing construct.
  size_t stack_floor() const { return marks_.empty() ? 0 : marks_.back(); }
  Val top() const {
    if (stack_.size() <= stack_floor()) fail("stack underflow");
    return stack_.back();
  }
  Val pop() {
    Val v = top();
    stack_.pop_back();
    return v;
  }
  std::vector<Val> pop_mark() {
    if (marks_.empty()) fail("no MARK on the stack");
    const size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<Val> items(stack_.begin() + static_cast<long>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }
  PyValue& expect_top(Kind kind, const char* opname) {
    PyValue& t = *top();
    if (!t.is(kind)) fail(std::string(opname) + " applied to a " + t.describe());
    return t;
  }
  void memo_put(uint64_t index) {
    Val v = top();
    const auto [it, fresh] = memo_.emplace(index, v);
    if (fresh) count();
    it->second = v;
  }
  Val memo_get(uint64_t index) const {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo index " + std::to_string(index) + " was never stored");
    return it->second;
  }

  Val sequence(Kind kind, std::vector<Val> items) {
    Val v = make(kind);
    v->items.assign(items.begin(), items.end());
    return v;
  }
  void set_items(PyValue& dict, const std::vector<Val>& kv) {
    if (kv.size() % 2) fail("odd number of items for a dict");
    // Python dict semantics: a repeated string key replaces the value in place. The index of
    // each dict's string keys keeps this linear in the number of items (a scan per item made a
    // hostile dict of 10^5 keys cost minutes).
    auto& index = string_keys_[&dict];
    for (size_t i = 0; i < kv.size(); i += 2) {
      if (kv[i]->is(Kind::String)) {
        const auto [it, fresh] = index.emplace(kv[i]->text, dict.entries.size());
        if (!fresh) {
          dict.entries[it->second].second = kv[i + 1];
          continue;
        }
      }
      dict.entries.emplace_back(kv[i], kv[i + 1]);
    }
  }

  Val reduce(const PyValue& callable, const PyValue& args) {
    if (!callable.is(Kind::Global)) return make_text(Kind::Object, "result of " + callable.describe());
    const std::string& name = callable.text;
    if (name == "collections.OrderedDict") {
      Val dict = make(Kind::Dict);
      if (!args.items.empty()) {  // OrderedDict([(k, v), ...])
        std::vector<Val> kv;
        for (const auto& pair : args.items[0]->items) {
          if (pair->items.size() != 2) fail("OrderedDict item is not a (key, value) pair");
          kv.push_back(pair->items[0]);
          kv.push_back(pair->items[1]);
        }
        set_items(*dict, std::move(kv));
      }
      return dict;
    }
    if (name == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(args);
    if (name == "torch._utils._rebuild_parameter") {
      if (args.items.empty() || !args.items[0]->is(Kind::Tensor))
        fail("_rebuild_parameter without a tensor");
      return args.items[0];
    }
    return make_text(Kind::Object, name);
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks
  //                    [, metadata])
  Val rebuild_tensor(const PyValue& args) {
    const auto& a = args.items;
    auto int_tuple = [&](const PyValue& t, std::vector<int64_t>& out) {
      if (!t.is(Kind::Tuple)) return false;
      for (const auto& x : t.items) {
        if (!x->is(Kind::Int)) return false;
        out.push_back(x->integer);
      }
      return true;
    };
    Val v = make(Kind::Tensor);
    v->ref = std::make_unique<TensorRef>();
    TensorRef& t = *v->ref;
    if (a.size() < 4 || !a[0]->is(Kind::Storage) || !a[1]->is(Kind::Int) ||
        !int_tuple(*a[2], t.shape) || !int_tuple(*a[3], t.stride) ||
        t.shape.size() != t.stride.size())
      fail("malformed torch._utils._rebuild_tensor_v2 arguments");
    t.storage = a[0]->storage();
    t.offset = a[1]->integer;
    return v;
  }

  // torch.save's persistent id: ('storage', torch.<Type>Storage, key, location, numel).
  Val persistent(const PyValue& pid) {
    const auto& p = pid.items;
    if (!pid.is(Kind::Tuple) || p.size() != 5 || !p[0]->is(Kind::String) ||
        p[0]->text != "storage" || !p[1]->is(Kind::Global) || !p[2]->is(Kind::String) ||
        !p[3]->is(Kind::String) || !p[4]->is(Kind::Int) || p[4]->integer < 0)
      return make_text(Kind::Object, "persistent id");
    Val v = make(Kind::Storage);
    v->ref = std::make_unique<TensorRef>();
    StorageRef& s = v->ref->storage;
    s.key = p[2]->text;
    s.location = p[3]->text;
    s.numel = p[4]->integer;
    s.dtype = p[1]->text;  // kept verbatim when unsupported, so errors can name it
    for (const auto& type : kStorageTypes)
      if (p[1]->text == type.name) {
        s.dtype = type.dtype;
        s.element_size = type.element_size;
      }
    return v;
  }

  const std::string& bytes_;
  const std::string& source_;
  size_t pos_ = 0;
  size_t op_offset_ = 0;
  size_t units_ = 0;
  std::shared_ptr<Arena> arena_;
  std::vector<Val> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Val> memo_;
  std::unordered_map<const PyValue*, std::unordered_map<std::string, size_t>> string_keys_;
};

}  // namespace

PyValuePtr unpickle(const std::string& bytes, const std::string& source) {
  return Unpickler(bytes, source).run();
}

}  // namespace sezm
