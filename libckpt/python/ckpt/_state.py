"""ckpt._state -- a trainer's state as libckpt items, and back.

save() turns the state (nested dicts, lists and tuples of tensors, numpy
arrays, bytes and small values) into
  - regions: the memory libckpt protects, one item each. A torch storage
    is one region, named by the path of the first tensor that uses it
    ("model/layer1.weight"); its bytes are the span its tensors in the state
    cover, whatever their strides, so views and tied weights are saved once
    and come back sharing memory. A numpy array is one region (the span of
    its strides); bytes of 1 KiB or more are one region;
  - a structure: everything else, as JSON (docs/python.md, "Format"): the
    containers with their key types, small values inline, and where each
    tensor sits in its region (dtype, shape, strides, offset). Values of
    other types are pickled into it, the tensors and arrays they hold kept
    out as regions (persistent ids); load() unpickles only a short list of
    harmless classes unless told to trust the store (a pickle from a store
    runs code).
load() is one ckpt_restore_alloc(): libckpt reads the structure items first
(its index round), the Builder allocates every region they describe
(torch.empty, numpy.empty, bytearray) -- refusing a checkpoint whose items
are not what its structure says (Misfit: libckpt falls back past it) --,
libckpt restores into them, and the Builder rebuilds the state.

torch and numpy are imported only when the state holds their objects.
"""

import base64
import collections
import io
import json
import pickle
import sys

FORMAT = 1
STATE_ITEM = ".ckpt/state"        # the structure of this rank's own part
STATE_REP_ITEM = ".ckpt/state.r"  # of the replicated subtrees (the same on every rank)
RESERVED = ".ckpt"                # no item of the state may be named under it
INLINE_BYTES = 1024               # bytes shorter than this stay in the structure


class Region:
    """One item to protect: memory at ptr, nbytes long.

    kind: "torch", "numpy" or "bytes"; desc: what load() needs to allocate
    it (JSON); keep: the object whose memory it is (kept alive during the
    save); device: the torch device of a CUDA region, else None."""
    __slots__ = ("name", "ptr", "nbytes", "elem", "replicated", "device", "kind", "desc",
                 "keep")

    def __init__(self, name, ptr, nbytes, elem, replicated, device, kind, desc, keep):
        self.name, self.ptr, self.nbytes, self.elem = name, ptr, nbytes, elem
        self.replicated, self.device, self.kind = replicated, device, kind
        self.desc, self.keep = desc, keep

    def key(self):
        """What libckpt was told: a region whose key is unchanged since the
        last save needs no new ckpt_protect_region()."""
        return (self.ptr, self.nbytes, self.elem, self.replicated, self.device is not None)


def _segment(key, where):
    """The item-name segment of a dict key or sequence index; where() names
    the place, for the error."""
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise ValueError("ckpt.save: key %r (%s) at %r cannot be part of an item name: "
                         "tensors, arrays and bytes must sit under str or int keys"
                         % (key, type(key).__name__, where()))
    seg = str(key)
    if not seg or seg in (".", "..") or "/" in seg or "\0" in seg:
        raise ValueError("ckpt.save: key %r at %r cannot be an item name segment (empty, "
                         "'.', '..', or containing '/' or NUL)" % (key, where()))
    return seg


def _hints():
    from . import _lib as L
    return ({"bfloat16": L.ELEM_F16, "float16": L.ELEM_F16, "float32": L.ELEM_F32,
             "int16": L.ELEM_E2, "int32": L.ELEM_E4},
            {"f2": L.ELEM_F16, "f4": L.ELEM_F32, "i2": L.ELEM_E2, "u2": L.ELEM_E2,
             "i4": L.ELEM_E4, "u4": L.ELEM_E4}, L.ELEM_BYTES)


_TORCH_HINT, _NUMPY_HINT, _BYTES_HINT = _hints()


def _elem_hint(kind, dtype):
    """The element hint (byte grouping) of a dtype."""
    if kind == "torch":
        return _TORCH_HINT.get(_dtype_name(dtype), _BYTES_HINT)
    name = dtype.str[1:] if dtype.fields is None else ""
    return _NUMPY_HINT.get(name, _BYTES_HINT)


_DTYPE_NAMES = {}


def _dtype_name(dtype):
    n = _DTYPE_NAMES.get(dtype)
    if n is None:
        n = _DTYPE_NAMES[dtype] = str(dtype).replace("torch.", "")
    return n


def _span(sizes, strides, itemsize):
    """(low, high) byte offsets of the elements of a strided layout,
    relative to its first element; None when it has no element. Raises
    ValueError if two elements overlap."""
    if any(s == 0 for s in sizes):
        return None
    lo = hi = 0
    dims = []
    for n, st in zip(sizes, strides):
        if n == 1:
            continue
        if st < 0:
            lo += (n - 1) * st
        else:
            hi += (n - 1) * st
        dims.append((abs(st), n))
    # no overlap: sorted by stride, each stride beyond the farthest byte the
    # dimensions below it reach (sufficient; the layouts it refuses are
    # exotic as_strided ones)
    dims.sort()
    reach = itemsize
    for st, n in dims:
        if st < reach:
            raise ValueError("overlapping")
        reach += (n - 1) * st
    return lo, hi + itemsize


class _Group:
    """Tensors of one storage (and dtype, device, replication): one region."""
    __slots__ = ("name", "lo", "hi", "nodes", "tensor", "dtype", "esize", "device")


class Flattener:
    """save(): state -> (structure documents, regions)."""

    def __init__(self, replicated):
        self.replicated = replicated  # True, or a set of top-level keys
        self.regions = collections.OrderedDict()
        self.groups = {}
        self.ids = {}  # id(obj) -> region name (numpy arrays, bytes)
        self.names = set()

    # -- the walk ------------------------------------------------------------
    def flatten(self, state):
        """@return (own, rep): the JSON documents of the structure items
        (None: that item is not written), and self.regions filled."""
        rep_all = self.replicated is True
        if not rep_all and self.replicated and not isinstance(state, dict):
            raise TypeError("ckpt.save: replicated= names top-level keys: the state must be "
                            "a dict (or pass replicated=True for all of it)")
        if isinstance(state, dict) and self.replicated and not rep_all:
            missing = [k for k in self.replicated if k not in state]
            if missing:
                raise KeyError("ckpt.save: replicated= names %r, not in the state" % missing)
            if all(k in self.replicated for k in state):
                rep_all = True
        if rep_all:
            root = self.node(state, [], True)
            own, rep = None, {"v": FORMAT, "root": root}
        elif self.replicated:
            if type(state) not in (dict, collections.OrderedDict):
                raise TypeError("ckpt.save: with replicated= keys, the state must be a dict")
            trees, entries = [], []
            for k, v in state.items():
                seg = [_Lazy(k, ())]
                if k in self.replicated:
                    entries.append([self.key_node(k), {"rep": len(trees)}])
                    trees.append(self.node(v, seg, True))
                else:
                    entries.append([self.key_node(k), self.node(v, seg, False)])
            own = {"v": FORMAT, "root": {"d" if type(state) is dict else "od": entries}}
            rep = {"v": FORMAT, "trees": trees}
        else:
            own, rep = {"v": FORMAT, "root": self.node(state, [], False)}, None
        self.finish()
        for d, rep_doc in ((own, False), (rep, True)):
            if d is not None:
                d["regions"] = {r.name: r.desc for r in self.regions.values()
                                if r.replicated == rep_doc}
        return own, rep

    def key_node(self, k):
        if isinstance(k, (str, int, float, bool)) or k is None:
            return k
        if isinstance(k, tuple):
            return {"t": [self.key_node(x) for x in k]}
        if isinstance(k, bytes):
            return {"b": base64.b64encode(k).decode()}
        return {"P": self.pickled(k)}

    def node(self, v, path, rep):
        t = type(v)
        if v is None or t in (bool, str, int, float):
            return v
        if t is dict or t is collections.OrderedDict:
            items = []
            for k, x in v.items():
                items.append([self.key_node(k), self.node(x, path + [_Lazy(k, path)], rep)])
            return {"d" if t is dict else "od": items}
        if t is list:
            return {"l": [self.node(x, path + [_Lazy(i, path)], rep) for i, x in enumerate(v)]}
        if t is tuple:
            return {"t": [self.node(x, path + [_Lazy(i, path)], rep) for i, x in enumerate(v)]}
        if t is bytes or t is bytearray:
            return self.bytes_node(v, path, rep)
        torch = sys.modules.get("torch")
        if torch is not None:
            if isinstance(v, torch.Tensor):
                return self.tensor_node(v, path, rep, torch)
            if isinstance(v, torch.dtype):
                return {"dtype": str(v).replace("torch.", "")}
            if isinstance(v, torch.device):
                return {"device": str(v)}
            if isinstance(v, torch.Size):
                return {"size": list(v)}
        np = sys.modules.get("numpy")
        if np is not None:
            if isinstance(v, np.ndarray) and type(v) is np.ndarray:
                return self.array_node(v, path, rep, np)
            if isinstance(v, np.generic) and not isinstance(v, np.object_):
                return {"np": {"dtype": _descr(np, v.dtype),
                               "b": base64.b64encode(v.tobytes()).decode()}}
        return self.pickle_node(v, path, rep)

    @staticmethod
    def pickled(v, pickler=None):
        try:
            if pickler is None:
                return base64.b64encode(pickle.dumps(v, protocol=4)).decode()
            f = io.BytesIO()
            pickler(f).dump(v)
            return base64.b64encode(f.getvalue()).decode()
        except Exception as e:  # anything pickle refuses
            raise TypeError("ckpt.save: a value of type %s cannot be saved: not a tensor, "
                            "array, bytes, container or plain value, and pickle refuses it "
                            "(%s)" % (type(v).__name__, e)) from None

    def pickle_node(self, v, path, rep):
        """A value of another type, pickled -- but the tensors and arrays it
        holds (a module, an optimizer, a scheduler's bound method, a class of
        the user's) are kept out of the pickle as torch.save keeps storages
        out of its own: each is a region like any tensor of the state
        (copied in the save's one stall, deduplicated, a storage already in
        the state saved once), named by the value's path and its number, and
        the pickle holds only its number (a persistent id). Without them the
        node is a plain {"P": pickle}; with them {"PT": {"p": pickle, "r":
        [their nodes]}}."""
        torch = sys.modules.get("torch")
        np = sys.modules.get("numpy")
        refs, seen, keep = [], {}, []
        fl = self

        class Pickler(pickle.Pickler):
            def persistent_id(self, obj):
                t = type(obj)
                if torch is not None and (t is torch.Tensor or t is torch.nn.Parameter):
                    if (obj.layout != torch.strided or obj.is_quantized
                            or obj.device.type not in ("cpu", "cuda")):
                        return None  # pickled as torch pickles it
                elif not (np is not None and t is np.ndarray and not obj.dtype.hasobject):
                    return None
                i = seen.get(id(obj))
                if i is not None:
                    return i  # one object, one place: identity survives the load
                where = path + [str(len(refs))]
                try:
                    ref = (fl.tensor_node(obj, where, rep, torch) if np is None or
                           t is not np.ndarray else fl.array_node(obj, where, rep, np))
                except ValueError:
                    return None  # overlapping elements: pickled with its bytes
                i = seen[id(obj)] = len(refs)
                refs.append(ref)
                keep.append(obj)  # an object made while pickling: its id stays its own
                return i

            def __init__(self, f):
                super().__init__(f, protocol=4)

        data = self.pickled(v, Pickler)
        if not refs:
            return {"P": data}
        return {"PT": {"p": data, "r": refs}}

    # -- leaves with memory --------------------------------------------------
    def name_of(self, path):
        name = "/".join(p.segment() if isinstance(p, _Lazy) else p for p in path)
        if not name:
            name = "state"  # the state itself is one tensor
        if name == RESERVED or name.startswith(RESERVED + "/"):
            raise ValueError("ckpt.save: the key %r is reserved for ckpt's own items" % RESERVED)
        return name

    def claim(self, name):
        if name in self.names:
            raise ValueError("ckpt.save: two entries of the state make the same item name %r "
                             "(keys such as 0 and '0' in one dict)" % name)
        self.names.add(name)

    def add_region(self, r):
        self.claim(r.name)
        self.regions[r.name] = r

    def bytes_node(self, v, path, rep):
        if len(v) < INLINE_BYTES:
            return {"b" if type(v) is bytes else "ba": base64.b64encode(bytes(v)).decode()}
        import ctypes
        name = self.ids.get(id(v))
        if name is None:
            name = self.name_of(path)
            if type(v) is bytes:
                ptr = ctypes.cast(ctypes.c_char_p(v), ctypes.c_void_p).value
            else:
                ptr = ctypes.addressof((ctypes.c_char * len(v)).from_buffer(v))
            self.add_region(Region(name, ptr, len(v), 0, rep, None, "bytes",
                                   {"kind": "bytes", "nbytes": len(v)}, v))
            self.ids[id(v)] = name
        return {"B" if type(v) is bytes else "BA": name}

    def array_node(self, a, path, rep, np):
        if a.dtype.hasobject:
            raise TypeError("ckpt.save: %r is a numpy array of Python objects: not saved "
                            "(convert it, or save its items)" % self.name_of(path))
        node = {"dtype": _descr(np, a.dtype), "shape": list(a.shape)}
        try:
            span = _span(a.shape, a.strides, a.itemsize)
        except ValueError:
            raise ValueError("ckpt.save: numpy array %r has overlapping elements (a broadcast "
                             "view): save a copy" % self.name_of(path)) from None
        if span is None:
            node["empty"] = True
            return {"A": node}
        name = self.ids.get(id(a))
        if name is None:
            name = self.name_of(path)
            ptr = a.__array_interface__["data"][0] + span[0]
            self.add_region(Region(name, ptr, span[1] - span[0], _elem_hint("numpy", a.dtype),
                                   rep, None, "numpy",
                                   {"kind": "numpy", "nbytes": span[1] - span[0]}, a))
            self.ids[id(a)] = name
        node.update(region=name, strides=list(a.strides), offset=-span[0])
        return {"A": node}

    def tensor_node(self, t, path, rep, torch):
        name = self.name_of(path)
        if t.layout != torch.strided:
            raise ValueError("ckpt.save: %r is a %s tensor: only dense (strided) tensors are "
                             "saved; convert it (to_dense())" % (name, t.layout))
        dev = t.device.type
        if dev == "meta":
            raise ValueError("ckpt.save: %r is a meta tensor: it holds no data" % name)
        if dev not in ("cpu", "cuda"):
            raise ValueError("ckpt.save: %r is on device %s: ckpt saves CPU and CUDA tensors"
                             % (name, t.device))
        if t.is_quantized:
            raise ValueError("ckpt.save: %r is a quantized tensor: save its int_repr() and "
                             "quantization parameters" % name)
        if t.is_conj() or t.is_neg():
            t = t.resolve_conj().resolve_neg()  # a lazy view: its bytes are not its values
        node = {"dtype": _dtype_name(t.dtype), "shape": list(t.shape),
                "stride": list(t.stride()), "device": str(t.device)}
        if type(t) is torch.nn.Parameter:
            node["param"] = True
        if t.requires_grad:
            node["grad"] = True
        esize = t.element_size()
        try:
            span = _span(t.shape, [s * esize for s in t.stride()], esize)
        except ValueError:
            raise ValueError("ckpt.save: tensor %r has overlapping elements (expand(), "
                             "as_strided()): save a copy (clone())" % name) from None
        if span is None:
            node["empty"] = True
            return {"T": node}
        start = t.data_ptr()
        storage = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        key = (rep, str(t.device), storage.data_ptr(), t.dtype)
        g = self.groups.get(key)
        if g is None:
            g = _Group()
            g.name, g.lo, g.hi, g.nodes, g.tensor = name, start, start + span[1], [], t
            g.dtype, g.esize, g.device = t.dtype, esize, t.device
            self.claim(name)
            self.groups[key] = g
        else:
            g.lo, g.hi = min(g.lo, start), max(g.hi, start + span[1])
        g.nodes.append((node, start))
        node["region"] = g.name
        return {"T": node}

    def finish(self):
        """The groups' spans are known: their regions, and each tensor's
        offset in its region (in elements)."""
        for (rep, _dev, _ptr, _dt), g in self.groups.items():
            for node, start in g.nodes:
                node["offset"] = (start - g.lo) // g.esize
            cuda = g.device.type == "cuda"
            self.regions[g.name] = Region(
                g.name, g.lo, g.hi - g.lo, _elem_hint("torch", g.dtype), rep,
                g.device if cuda else None, "torch",
                {"kind": "torch", "dtype": _dtype_name(g.dtype),
                 "nbytes": g.hi - g.lo, "device": str(g.device)}, g.tensor)


class _Lazy:
    """A path segment made into an item name only when a region needs it
    (keys of other types are fine where no tensor lies below), once."""
    __slots__ = ("key", "path", "seg")

    def __init__(self, key, path):
        self.key, self.path, self.seg = key, path, None

    def segment(self):
        if self.seg is None:
            self.seg = _segment(self.key, lambda: _path_text(self.path))
        return self.seg


def _path_text(path):
    out = []
    for p in path:
        if isinstance(p, _Lazy):
            out.append(p.seg if p.seg is not None else str(p.key))
        else:
            out.append(p)
    return "/".join(out) or "<state>"


def _descr(np, dtype):
    return json.loads(json.dumps(np.lib.format.dtype_to_descr(dtype)))


class Misfit(ValueError):
    """A checkpoint load() cannot take, as ckpt_restore_alloc's status
    (a name of _lib: "E_SIZE", "E_MISMATCH", "E_CORRUPT", "E_UNSUPPORTED");
    libckpt then tries the one before it (ckpt.h, ckpt_restore_alloc)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def encode(doc):
    return json.dumps(doc, separators=(",", ":"), allow_nan=True).encode()


def decode(buf, what):
    """The structure document in buf. Raises Misfit: E_CORRUPT when it is
    no structure, E_UNSUPPORTED for a newer format."""
    try:
        doc = json.loads(bytes(buf).decode())
    except ValueError as e:
        raise Misfit("E_CORRUPT", "%s is not a structure (%s)" % (what, e))
    if not isinstance(doc, dict) or not isinstance(doc.get("v"), int):
        raise Misfit("E_CORRUPT", "%s is not a structure" % what)
    if doc["v"] != FORMAT:
        raise Misfit("E_UNSUPPORTED", "%s has format %r; this version reads %d: upgrade ckpt"
                     % (what, doc["v"], FORMAT))
    return doc


# ---------------------------------------------------------------- loading

_SAFE = {
    ("builtins", n) for n in ("set", "frozenset", "complex", "slice", "range", "bytearray",
                              "list", "dict", "tuple", "int", "float", "str", "bytes", "bool")
} | {
    ("collections", n) for n in ("OrderedDict", "defaultdict", "deque", "Counter")
} | {
    ("datetime", n) for n in ("datetime", "date", "time", "timedelta", "timezone")
} | {("decimal", "Decimal"), ("fractions", "Fraction")}


class Refused(pickle.UnpicklingError):
    """A pickle holding a class load() does not unpickle by default; path:
    the keys down to it, filled in on the way up."""

    def __init__(self, module, name):
        super().__init__("%s.%s" % (module, name))
        self.module, self.name, self.path = module, name, []

    def message(self):
        where = "".join("[%r]" % k for k in reversed(self.path))
        return ("ckpt.load: state%s holds a pickled %s.%s; load() unpickles only plain "
                "types by default, since unpickling data from a store can run any code. "
                "Pass ckpt.load(..., allow_pickle=True) if you trust the store."
                % (where, self.module, self.name))


class _Unpickler(pickle.Unpickler):
    """The pickle of a {"P"} or {"PT"} node; ref(i): the object of its
    persistent id i (the tensors and arrays kept out of it)."""

    def __init__(self, data, ref):
        super().__init__(io.BytesIO(data))
        self.ref = ref

    def persistent_load(self, pid):
        if self.ref is None or type(pid) is not int:
            raise pickle.UnpicklingError("ckpt.load: a pickle refers to %r, which the "
                                         "structure does not hold" % (pid,))
        return self.ref(pid)


class _Restricted(_Unpickler):
    def find_class(self, module, name):
        if (module, name) in _SAFE:
            return super().find_class(module, name)
        raise Refused(module, name)


class Builder:
    """load(): regions allocated, then (once restored) the state rebuilt from
    the structure documents: `own` (this rank's part, or None) and `rep`
    (the replicated subtrees, or None)."""

    def __init__(self, own, rep, map_location, allow_pickle):
        self.own, self.rep = own, rep
        self.map_location = map_location
        self.allow_pickle = allow_pickle
        self.bufs = {}      # region name -> (the allocated object, its description)

    def allocate(self, items):
        """Memory for a checkpoint's items [(name, nbytes, replicated)] (its
        structure items aside), after checking them against the structure:
        every region it describes, of its size, and nothing else.
        @return [(object, address)] per item (address 0: no bytes). Raises
        Misfit."""
        described = {}
        for d, rep in ((self.own, False), (self.rep, True)):
            regions = d.get("regions", {}) if d is not None else {}
            if not isinstance(regions, dict):
                raise Misfit("E_CORRUPT", "the structure's regions are not a map")
            for name, desc in regions.items():
                described[name] = (desc, rep)
        out = []
        for name, nbytes, rep in items:
            if name not in described:
                raise Misfit("E_MISMATCH", "item %r is not in the checkpoint's structure" % name)
            desc, drep = described.pop(name)
            try:
                want = int(desc["nbytes"])
            except (KeyError, TypeError, ValueError):
                raise Misfit("E_CORRUPT", "region %r: no size in the structure" % name)
            if want != nbytes or drep != rep:
                raise Misfit("E_SIZE" if want != nbytes else "E_MISMATCH",
                             "item %r is %d bytes%s, its structure says %d%s"
                             % (name, nbytes, " replicated" if rep else "", want,
                                " replicated" if drep else ""))
            out.append(self._region(name, desc, nbytes))
        if described:
            raise Misfit("E_MISMATCH", "the structure describes %r, the checkpoint lacks it"
                         % sorted(described)[0])
        return out

    def _region(self, name, desc, nbytes):
        kind = desc.get("kind") if isinstance(desc, dict) else None
        if kind == "torch":
            import torch
            dtype = _torch_dtype(torch, desc["dtype"])
            esize = torch.empty((), dtype=dtype).element_size()
            if nbytes % esize:
                raise Misfit("E_CORRUPT", "region %r: %d bytes is no whole number of %s "
                             "elements" % (name, nbytes, dtype))
            base = torch.empty(nbytes // esize, dtype=dtype)
            ptr = base.data_ptr()
        elif kind == "numpy":
            import numpy as np
            base = np.empty(nbytes, dtype=np.uint8)
            ptr = base.__array_interface__["data"][0]
        elif kind == "bytes":
            import ctypes
            base = bytearray(nbytes)
            ptr = ctypes.addressof((ctypes.c_char * nbytes).from_buffer(base)) \
                if nbytes else 0
        else:
            raise Misfit("E_UNSUPPORTED", "region %r of unknown kind %r: written by a newer "
                         "ckpt?" % (name, kind))
        self.bufs[name] = (base, desc)
        return base, (ptr if nbytes else 0)

    def own_keys(self):
        """The top-level keys of the entries that are a rank's own (not
        replicated), as a list of their reprs; [] when all are replicated."""
        if self.own is None:
            return []
        root = self.own.get("root")
        if isinstance(root, dict) and len(root) == 1:
            (tag, val), = root.items()
            if tag in ("d", "od") and isinstance(val, list):
                return [repr(self.key(k)) for k, v in val
                        if not (isinstance(v, dict) and "rep" in v)]
        return ["(the whole state)"]

    def build(self):
        """The state, from the documents and the restored regions."""
        self.trees = self.rep.get("trees", []) if self.rep is not None else []
        try:
            if self.own is None:
                return self.node(self.rep["root"])
            return self.node(self.own["root"])
        except Refused as e:
            raise pickle.UnpicklingError(e.message()) from None

    def _below(self, key, make):
        """make(), naming key in the path of a pickle it refuses."""
        try:
            return make()
        except Refused as e:
            e.path.append(key)
            raise

    def node(self, n):
        if not isinstance(n, dict):
            if isinstance(n, list):
                raise ValueError("ckpt.load: malformed structure (a bare list)")
            return n
        if len(n) != 1:
            raise ValueError("ckpt.load: malformed structure node %r" % (sorted(n)[:4],))
        (tag, val), = n.items()
        if tag == "d" or tag == "od":
            out = {} if tag == "d" else collections.OrderedDict()
            for k, v in val:
                key = self.key(k)
                out[key] = self._below(key, lambda: self.node(v))
            return out
        if tag == "l":
            return [self._below(i, lambda: self.node(x)) for i, x in enumerate(val)]
        if tag == "t":
            return tuple(self._below(i, lambda: self.node(x)) for i, x in enumerate(val))
        if tag == "rep":
            return self.node(self.trees[int(val)])
        if tag in ("b", "ba"):
            b = base64.b64decode(val)
            return b if tag == "b" else bytearray(b)
        if tag == "B":
            return bytes(self.bufs[val][0])
        if tag == "BA":
            return self.bufs[val][0]
        if tag == "T":
            return self.tensor(val)
        if tag == "A":
            return self.array(val)
        if tag == "np":
            import numpy as np
            return np.frombuffer(base64.b64decode(val["b"]),
                                 dtype=np.lib.format.descr_to_dtype(_descr_in(val["dtype"])))[0]
        if tag == "dtype":
            import torch
            return _torch_dtype(torch, val)
        if tag == "device":
            import torch
            return torch.device(val)
        if tag == "size":
            import torch
            return torch.Size(val)
        if tag == "P":
            return self._unpickle(base64.b64decode(val), None)
        if tag == "PT":
            if not isinstance(val, dict) or not isinstance(val.get("r"), list):
                raise ValueError("ckpt.load: malformed structure (a pickle's references)")
            refs, made = val["r"], {}

            def ref(i):
                if not 0 <= i < len(refs):
                    raise pickle.UnpicklingError("ckpt.load: a pickle refers to object %d "
                                                 "of %d" % (i, len(refs)))
                if i not in made:
                    made[i] = self.node(refs[i])
                return made[i]
            return self._unpickle(base64.b64decode(val.get("p", "")), ref)
        raise ValueError("ckpt.load: unknown structure node %r: written by a newer ckpt?" % tag)

    def key(self, k):
        return self.node(k) if isinstance(k, dict) else k

    def _unpickle(self, data, ref):
        return (_Unpickler if self.allow_pickle else _Restricted)(data, ref).load()

    def tensor(self, n):
        import torch
        dtype = _torch_dtype(torch, n["dtype"])
        if n.get("empty"):
            t = torch.empty_strided(n["shape"], n["stride"], dtype=dtype)
        else:
            base = self.bufs[n["region"]][0]
            if base.dtype != dtype:
                raise ValueError("ckpt.load: region %r holds %s, a tensor of it %s"
                                 % (n["region"], base.dtype, dtype))
            t = base.as_strided(n["shape"], n["stride"], int(n["offset"]))
        t = self.place(t, n.get("device", "cpu"), torch)
        if n.get("param"):
            return torch.nn.Parameter(t, requires_grad=bool(n.get("grad")))
        if n.get("grad"):
            t.requires_grad_(True)
        return t

    def place(self, t, saved, torch):
        """map_location as torch.load takes it: None (where it was saved),
        a device or its name, a dict {saved: target}, or a callable."""
        ml = self.map_location
        if callable(ml) and not isinstance(ml, (str, torch.device)):
            out = ml(t, saved)
            return t if out is None else out
        if isinstance(ml, dict):
            target = ml.get(saved, saved)
        elif ml is None:
            target = saved
        else:
            target = ml
        target = torch.device(target)
        if target.type == "cpu":
            return t
        if target.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("ckpt.load: a tensor was saved on %s, and CUDA is not available "
                               "here: pass map_location='cpu'" % saved)
        return t.to(target)

    def array(self, n):
        import numpy as np
        dtype = np.lib.format.descr_to_dtype(_descr_in(n["dtype"]))
        if n.get("empty"):
            return np.empty(n["shape"], dtype=dtype)
        base = self.bufs[n["region"]][0]
        return np.ndarray(tuple(n["shape"]), dtype=dtype, buffer=base, offset=int(n["offset"]),
                          strides=tuple(n["strides"]))


def _descr_in(d):
    """A dtype description from JSON: numpy wants tuples where JSON has lists
    (fields: (name or (title, name), descr[, shape]))."""
    if not isinstance(d, list):
        return d
    out = []
    for f in d:
        f = list(f)
        if isinstance(f[0], list):
            f[0] = tuple(f[0])
        if len(f) > 1:
            f[1] = _descr_in(f[1])
        if len(f) > 2 and isinstance(f[2], list):
            f[2] = tuple(f[2])
        out.append(tuple(f))
    return out


def _torch_dtype(torch, name):
    dt = getattr(torch, str(name), None)
    if not isinstance(dt, torch.dtype):
        raise Misfit("E_UNSUPPORTED", "unknown torch dtype %r (a newer torch wrote it?)" % name)
    return dt
