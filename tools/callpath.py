#!/usr/bin/env python3
"""callpath.py -- the files a call passes through, from gcc's call graphs.

Build the library's objects with -fcallgraph-info (gcc writes one .ci file
beside each object), then:

    tools/callpath.py BUILD_DIR pp_pin [pp_get ...] [--show]

walks every chain of direct calls from each function given, through the
functions of src/, and checks that no chain enters a file it already left
(a file's own functions calling each other stay in it).  Header functions
inlined by the compiler leave no edge, as entry.h's transitions do.
Calls through a function pointer are listed: the graph cannot follow them.
Exits 1 if a chain re-enters a file.  `tools/callpath.py --selftest` shows
that a chain which re-enters a file is caught.  The test layout.callpath
runs it on the library's objects (CMakeLists.txt builds them with
-fcallgraph-info under gcc).
"""
import glob, os, re, sys

SUFFIX = re.compile(r'[.](localalias|part[.]\d+|constprop[.]\d+|isra[.]\d+|cold)$')

def load(build):
    node_file, edges = {}, {}
    for ci in glob.glob(os.path.join(build, '**', '*.ci'), recursive=True):
        text = open(ci).read()
        for m in re.finditer(r'node: \{ title: "([^"]+)" label: "([^"\\]+)\\n([^:"]+):\d+:\d+"( shape)?', text):
            title, _, path, decl = m.groups()
            if decl is None and '/src/' in path:        # a definition in src/
                node_file[title] = path[path.index('/src/') + 1:]
        for m in re.finditer(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"', text):
            edges.setdefault(m.group(1), []).append(m.group(2))
    def canon(t):
        while SUFFIX.search(t):
            t = SUFFIX.sub('', t)
        bare = t.split(':')[-1]
        if t not in node_file and bare in node_file:
            return bare                                 # a global's local alias
        return t
    node_file = {canon(t): f for t, f in node_file.items()}
    merged = {}
    for src, dsts in edges.items():
        merged.setdefault(canon(src), []).extend(canon(d) for d in dsts)
    return node_file, merged

def check(node_file, edges, root, show):
    bad, seen_paths, pointers = [], set(), set()
    def walk(fn, files, chain):
        f = node_file[fn]
        if f != files[-1]:
            if f in files:
                bad.append(' -> '.join(c.split(':')[-1] for c in chain + [fn]) +
                           '  (re-enters %s)' % f)
                return
            files = files + [f]
        key = (fn, tuple(files))
        if key in seen_paths:
            return
        seen_paths.add(key)
        if show:
            print('  ' * len(chain) + '%s  [%s]' % (fn.split(':')[-1], f))
        for callee in sorted(set(edges.get(fn, []))):
            if callee in node_file and callee not in chain:
                walk(callee, files, chain + [fn])
            elif callee.startswith('__indirect_call'):
                pointers.add('%s (%s)' % (fn.split(':')[-1], f))
    walk(root, [node_file[root]], [])
    files = sorted({f for (_, fs) in seen_paths for f in fs})
    print('callpath: from %s, %d chains through %d files' % (root, len(seen_paths), len(files)))
    for p in sorted(pointers):
        print('callpath: call through a pointer in %s' % p)
    for b in bad:
        print('callpath: RE-ENTERS: ' + b)
    return not bad

def selftest():
    # a.c:f -> b.c:g -> a.c:h re-enters a.c; a.c:f -> a.c:k -> c.c:m does not.
    node_file = {'f': 'src/a.c', 'g': 'src/b.c', 'h': 'src/a.c', 'k': 'src/a.c', 'm': 'src/c.c'}
    edges = {'f': ['g', 'k'], 'g': ['h'], 'k': ['m']}
    caught = not check(node_file, edges, 'f', False)
    edges['g'] = []
    clean = check(node_file, edges, 'f', False)
    print('callpath: selftest %s' % ('PASS' if caught and clean else 'FAIL'))
    sys.exit(0 if caught and clean else 1)

def main():
    if sys.argv[1:] == ['--selftest']:
        selftest()
    show = '--show' in sys.argv
    args = [a for a in sys.argv[1:] if a != '--show']
    build, roots = args[0], args[1:]
    node_file, edges = load(build)
    ok = True
    for root in roots:
        if root not in node_file:
            sys.exit('callpath: %s is not defined in src/ (built with -fcallgraph-info?)' % root)
        ok = check(node_file, edges, root, show) and ok
    sys.exit(0 if ok else 1)

main()
