#!/usr/bin/env python3
"""Builds tests/data/xrootd-releases.tsv from XRootD's git history.

Usage: tests/data/xrootd-releases.py GIT_DIR > tests/data/xrootd-releases.tsv
GIT_DIR: a clone of github.com/xrootd/xrootd (bare is fine). The release
ranges, format conversions and lines are read from the source of every
release tag (v3.0.0 .. v6.1.0, no -rc tags) and master; whether a variable
is cumulative, when it is sent and the notes were decided by reading the
code that fills each field (the `SEM` table below says where).
"""
import collections, re, subprocess, sys

G = sys.argv[1]
def git(*a):
    return subprocess.run(['git', '--git-dir=' + G, *a], capture_output=True).stdout.decode('latin-1')

def vkey(t):
    return tuple(int(x) for x in t[1:].split('.'))
TAGS = sorted((t for t in git('tag').split() if re.fullmatch(r'v\d+\.\d+\.\d+', t)), key=vkey)
TAGS = [t for t in TAGS if vkey(t) >= (3, 0, 0)]
ALL = TAGS + ['master']
LATEST = TAGS[-1]

decl = re.compile(r'((?:static\s+)?(?:const\s+)?char\s*\*?\s*(?:const\s+)?(\w+)\s*(\[\s*\w*\s*\])?\s*=)')
lit = re.compile(r'"((?:[^"\\]|\\.)*)"')
FILES = ['src/Xrd/XrdStats.cc', 'src/Xrd/XrdBuffer.cc', 'src/Xrd/XrdBuffXL.cc', 'src/Xrd/XrdLink.cc',
         'src/Xrd/XrdLinkXeq.cc', 'src/Xrd/XrdPoll.cc', 'src/Xrd/XrdScheduler.cc',
         'src/XrdCms/XrdCmsCluster.cc', 'src/XrdOfs/XrdOfsStats.cc', 'src/XrdOss/XrdOssApi.cc',
         'src/XrdOss/XrdOssStat.cc', 'src/XrdRootd/XrdRootdProtocol.cc',
         'src/XrdXrootd/XrdXrootdStats.cc', 'src/XrdSsi/XrdSsiStats.cc', 'src/XrdPosix/XrdPosixConfig.cc',
         'src/XrdHttp/XrdHttpMon.cc', 'src/XrdApps/XrdMpxXml.cc', 'src/XrdApps/XrdMpxStats.cc']
_cache = {}
def show(t, f):
    if (t, f) not in _cache:
        _cache[(t, f)] = git('show', f'{t}:{f}')
    return _cache[(t, f)]

def frags(t, f):
    """Every char string constant with markup in it: (name, text, line)."""
    lines = show(t, f).split('\n'); out = []; i = 0
    while i < len(lines):
        m = decl.search(lines[i])
        nxt = lines[i + 1] if i + 1 < len(lines) else ''
        if m and '"' in lines[i][m.end():] + nxt:
            j = i; txt = ''
            while j < len(lines):
                part = lines[j][m.end():] if j == i else lines[j]
                part = re.sub(r'//.*$', '', part)
                txt += part + '\n'
                if ';' in part.split('"')[-1]:
                    break
                j += 1
            s = ''.join(lit.findall(txt)).replace('\\"', '"').replace('\\n', '')
            if '<' in s:
                out.append(dict(name=m.group(2), fmt=s, line=i + 1))
            i = j + 1
        else:
            i += 1
    return out

TOK = re.compile(r'<(/?)(\w+)((?:\s+\w+="[^"]*")*)\s*>|%l{0,2}[dus]|%%|[^<%]+|<|%')
def walk(fmt, line, path, out, f):
    for m in TOK.finditer(fmt):
        s = m.group(0)
        if m.group(2):
            name = m.group(2)
            attrs = dict(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ''))
            if m.group(1):
                if name == 'stats':
                    while path and path[-1][1] != 'stats':
                        path.pop()
                    if path:
                        path.pop()
                else:
                    for k in range(len(path) - 1, -1, -1):
                        if path[k][0] == name:
                            del path[k:]
                            break
            elif name == 'stats':
                sid = attrs.get('id', '?')
                path.append(('i' if sid.startswith('%') else sid, 'stats'))
            else:
                path.append((name, 'el'))
        elif s.startswith('%') and s != '%%':
            out.append(('.'.join(p[0] for p in path), s, f, line))

def compose(t):
    F = {f: frags(t, f) if show(t, f) else None for f in FILES}
    out = []
    def find(f, pat):
        for fr in F.get(f) or []:
            if pat in fr['fmt']:
                return fr
        return None
    h = find('src/Xrd/XrdStats.cc', '<statistics tod=')
    if h:
        for a, v in re.findall(r'(\w+)="([^"]*)"', h['fmt']):
            out.append((a, v or '%s', 'src/Xrd/XrdStats.cc', h['line']))
    for f, pat in [('src/Xrd/XrdStats.cc', 'id="info"'), ('src/Xrd/XrdStats.cc', 'id="proc"'),
                   ('src/Xrd/XrdStats.cc', 'id="sgen"'), ('src/Xrd/XrdLink.cc', 'id="link"'),
                   ('src/Xrd/XrdLinkXeq.cc', 'id="link"'), ('src/Xrd/XrdPoll.cc', 'id="poll"'),
                   ('src/Xrd/XrdScheduler.cc', 'id="sched"'), ('src/XrdOfs/XrdOfsStats.cc', 'id="ofs"'),
                   ('src/XrdRootd/XrdRootdProtocol.cc', 'id="rootd"'),
                   ('src/XrdXrootd/XrdXrootdStats.cc', 'id="xrootd"'), ('src/XrdSsi/XrdSsiStats.cc', 'id="ssi"'),
                   ('src/XrdCms/XrdCmsCluster.cc', 'id="cms"><role>')]:
        fr = find(f, pat)
        if fr:
            walk(fr['fmt'], fr['line'], [], out, f)
    b = find('src/Xrd/XrdBuffer.cc', 'id="buff"')
    if b:
        p = []
        xl = find('src/Xrd/XrdBuffXL.cc', '<xlreqs>')
        if xl and '%s</stats>' in b['fmt']:
            walk(b['fmt'].replace('%s</stats>', ''), b['line'], p, out, 'src/Xrd/XrdBuffer.cc')
            walk(xl['fmt'] + '</stats>', xl['line'], p, out, 'src/Xrd/XrdBuffXL.cc')
        else:
            walk(b['fmt'], b['line'], p, out, 'src/Xrd/XrdBuffer.cc')
    f = 'src/XrdCms/XrdCmsCluster.cc'
    c1 = find(f, 'id="cmsm"')
    if c1:  # Statt(): statfmt1, per node statfmt2 with statfmt3 at its %s, statfmt4, statfmt5, statfmt0
        c2 = find(f, '<host>%s</host>'); c3 = find(f, '<shr>'); c5 = find(f, '<frq>')
        p = []
        walk(c1['fmt'], c1['line'], p, out, f)
        walk(c2['fmt'].replace('%s</stats>', ''), c2['line'], p, out, f)
        walk(c3['fmt'] + '</stats>', c3['line'], p, out, f)
        walk('</node>', 0, p, out, f)
        walk(c5['fmt'] + '</stats>', c5['line'], p, out, f)
    o1 = find('src/XrdOss/XrdOssApi.cc', 'id="oss"')
    if o1:  # Stats(): statfmt1, getStats() (ptag*, stag*), statfmt2
        f = 'src/XrdOss/XrdOssStat.cc'; p = []
        walk(o1['fmt'], o1['line'], p, out, 'src/XrdOss/XrdOssApi.cc')
        for pat in ['<paths>', '<lp>']:
            fr = find(f, pat); walk(fr['fmt'], fr['line'], p, out, f)
        walk('</paths>', 0, p, out, f)
        for pat in ['<space>', '<name>', '<qta>']:
            fr = find(f, pat); walk(fr['fmt'], fr['line'], p, out, f)
        walk('</stats></space></stats>', 0, p, out, f)
    f = 'src/XrdPosix/XrdPosixConfig.cc'
    s1 = find(f, '<open>%lld<errs>')
    if s1:  # XrdPss.cc calls XrdPosixConfig::Stats("pss", ...)
        walk(s1['fmt'].replace('id="%s"', 'id="pss"'), s1['line'], [], out, f)
    s2 = find(f, 'id="cache"')
    if s2:
        walk(s2['fmt'], s2['line'], [], out, f)
    f = 'src/XrdHttp/XrdHttpMon.cc'
    src = show(t, f)
    if src and 'Register(XrdMonRoll::AddOn, "http_plugin"' in src:
        obj = None
        for n, l in enumerate(src.split('\n'), 1):
            m = re.search(r'XrdMonRoll::Item\("([^"]+)",\s*(XrdMonRoll::Item::Schema::(beg|end)Object|\w+\[)', l)
            if not m:
                continue
            if m.group(3) == 'beg':
                obj = m.group(1)
            elif m.group(3) == 'end':
                obj = None
            else:
                out.append((f'http_plugin.{obj}.{m.group(1)}', '%llu', f, n))
    for f in ['src/XrdApps/XrdMpxXml.cc', 'src/XrdApps/XrdMpxStats.cc']:
        for n, l in enumerate(show(t, f).split('\n'), 1):
            if 'Add(oP, "host", Host)' in l:
                out.append(('host', '%s', f, n))
    return out

# What each variable is, from reading the code that fills it (v6.1.0 unless
# said): cumulative (yes: only ever incremented, a running total; no: a level,
# a high-water mark, a time, an identifier, text), the C width of the value
# printed (bits; '-' for text), when it is sent beyond its section being
# selected by xrd.report, and a note.
Y, N = 'yes', 'no'
SEM = {}
def sem(names, cum, when='-', note='', width=None):
    for n in names.split():
        SEM[n] = (cum, when, note, width)
sem('tod', N, note='time of this report (time(0))')
sem('ver src pgm ins site', N)
sem('tos', N, note='program start time, constant per run')
sem('pid', N, note='constant per run')
sem('info.host info.name', N)
sem('info.port', N, note='constant per run (0 for a cmsd without a port)')
sem('proc.usr.s proc.sys.s', Y, note='CPU seconds, getrusage()')
sem('proc.usr.u proc.sys.u', N, note='microseconds part of the CPU time, 0-999999')
sem('sgen.as', N, note='1 when the report was not synchronised')
sem('sgen.et', N, note='milliseconds spent making this report')
sem('sgen.toe', N, note='time the report was finished')
sem('link.num', N, note='connections now')
sem('link.maxn', N, note='high-water mark (XrdLinkCtl.cc:188), never reset')
sem('link.tot link.in link.out link.ctime link.tmo link.stall link.sfps', Y)
sem('poll.att', N, note='descriptors attached now')
sem('poll.en poll.ev', Y)
sem('poll.int', Y, note='counted by the poll(2) back end only (XrdPollPoll.icc:294); 0 with epoll on Linux')
sem('sched.jobs sched.tcr sched.tde sched.tlimr', Y)
sem('sched.inq sched.threads sched.idle', N)
sem('sched.maxinq', N, note='high-water mark of inq')
sem('buff.reqs', N, note='set to 0 by the reshaper each time it runs (XrdBuffer.cc:272)')
sem('buff.mem buff.buffs buff.xlmem buff.xlbuffs', N)
sem('buff.adj buff.xlreqs', Y)
sem('ofs.role', N)
sem('ofs.opr ofs.opw ofs.opp ofs.han', N, note='files or handles open now')
sem('ofs.ups ofs.rdr ofs.bxq ofs.rep ofs.err ofs.dly ofs.sok ofs.tpc.grnt ofs.tpc.deny ofs.tpc.err ofs.tpc.exp', Y)
sem('ofs.ser', Y, note='numSeventER is never incremented: always 0')
for v in 'oss.paths oss.paths.i.tot oss.paths.i.free oss.paths.i.ino oss.paths.i.ifr oss.space oss.space.i.tot oss.space.i.free oss.space.i.maxf oss.space.i.fsn oss.space.i.usg'.split():
    sem(v, N)
sem('oss.paths.i.lp oss.paths.i.rp oss.space.i.name', N)
SEM['oss.paths.i.tot'] = (N, '-', 'KiB', None)
SEM['oss.paths.i.free'] = (N, '-', 'KiB', None)
SEM['oss.space.i.tot'] = (N, '-', 'KiB', None)
SEM['oss.space.i.free'] = (N, '-', 'KiB', None)
SEM['oss.space.i.maxf'] = (N, '-', 'KiB', None)
SEM['oss.space.i.usg'] = (N, '-', 'KiB', None)
sem('oss.space.i.qta', N, when='a quota is set', note='bytes')
sem('rootd.num', Y, note='int Count printed with %ld', width='32')
sem('xrootd.num xrootd.ops.open xrootd.ops.rf xrootd.ops.rd xrootd.ops.pr xrootd.ops.rv xrootd.ops.rs xrootd.ops.wv xrootd.ops.ws xrootd.ops.wr xrootd.ops.sync xrootd.ops.getf xrootd.ops.putf xrootd.ops.misc', Y)
sem('xrootd.sig.ok xrootd.sig.bad xrootd.sig.ign xrootd.aio.rej xrootd.err xrootd.rdr xrootd.dly xrootd.lgn.num xrootd.lgn.af xrootd.lgn.au xrootd.lgn.ua', Y)
sem('xrootd.aio.num', Y, note='AsyncNum is never updated: always 0')
sem('xrootd.aio.max', N, note='meant as a high-water mark; AsyncMax is never updated: always 0')
sem('cms.role', N)
sem('cmsm.role cmsm.node.i.host cmsm.node.i.role cmsm.node.i.run', N)
sem('cmsm.sel.t', Y)
sem('cmsm.sel.r cmsm.sel.w', N,
    note='resummed from the nodes every 60 s (MonRefs, XrdCmsCluster.cc:730-731): drops when a node leaves')
sem('cmsm.node', N, note='nodes now')
sem('cmsm.node.i.ref.r cmsm.node.i.ref.w', Y, note='RefTotR/RefTotW, never reset')
sem('cmsm.node.i.shr', N, when='cms.repstats shr, meta-manager', note='share, 1-100', width='8')
sem('cmsm.node.i.shr.use', Y, when='cms.repstats shr, meta-manager',
    note='Shrin: RAtomic_char since 5.4.0 (XrdCmsNode.hh:262), int before; printed with %d: wraps 127 -> -128 (signed char) or 255 -> 0 (unsigned char)')
sem('cmsm.frq.add cmsm.frq.add.d cmsm.frq.rsp cmsm.frq.rsp.m', Y, when='cms.repstats frq')
sem('cmsm.frq.lf cmsm.frq.ls cmsm.frq.rf cmsm.frq.rs', Y, when='cms.repstats frq',
    note='running totals added again on each pass (XrdCmsRRQ.cc:250-251): inflated')
sem('ssi.err ssi.req.bytes ssi.req.cnt ssi.req.rdr ssi.req.dly ssi.req.ab ssi.req.proc ssi.req.gets ssi.req.relb ssi.req.al ssi.req.fin ssi.req.can ssi.req.finf ssi.req.perr', Y)
sem('ssi.rsp.bad ssi.rsp.cbk ssi.rsp.data ssi.rsp.errs ssi.rsp.file ssi.rsp.str ssi.rsp.rdy ssi.rsp.unr ssi.res.add ssi.res.rem', Y)
sem('ssi.rsp.mdb', Y, note='its end tag is written </mdb without > (XrdSsiStats.cc:99)')
sem('ssi.req.maxsz', N, note='largest request, high-water mark')
sem('ssi.req.bnd', N, note='requests bound now')
sem('pss.open pss.open.errs pss.close pss.close.errs', Y)
C = 'proxy with a cache (pfc or rmc)'
sem('cache.prerd.in cache.prerd.hits cache.prerd.miss cache.rd.in cache.rd.out cache.rd.miss cache.pass cache.wr.out cache.wr.updt cache.saved cache.purge', Y)
sem('cache.pass.cnt', Y, note="X.Pass is only summed from another stats object's Pass (XrdOucCacheStats.hh:108), which nothing increments: always 0")
sem('cache.rd.hits', Y, note='written <hits>N></hits> from 5.0.0 to 5.6.9 (XrdPosixConfig.cc:566 at v5.6.9, fixed in 5.7.0)')
NEVER_SET = 'only XrdOucCacheStats::Set(XrdOucCacheStats&) writes it (XrdOucCacheStats.hh:113-120) and nothing calls it: always 0'
sem('cache.files.opened cache.files.closed cache.files.new cache.files.del', Y, note=NEVER_SET)
sem('cache.files.now cache.files.full cache.store.used', N, note=NEVER_SET)
sem('cache.store.size', N, note='set by XCache (XrdPfcPurge.cc:620 in 5.x, XrdPfcResourceMonitor.cc:886 in 6.x)')
sem('cache.mem.size cache.mem.used cache.mem.wq', N)
sem('cache.store.min cache.store.max', N, note='least and most bytes in use; ' + NEVER_SET)
sem('cache.opcl.odefer cache.opcl.cdefer cache.opcl.clost', Y)
sem('cache.opcl.defero', Y, note='DeferOpens (XrdOucCacheStats.hh:90) is never written: always 0')
sem('host', N, when='mpxstats -s', note='added by mpxstats -s (the datagram sender), not sent by xrootd')
sem('toe', N, note='end-tag attribute </statistics toe="%ld">; replaced by sgen.toe')

def sem_of(var):
    if var == 'http_plugin.response.100':
        return (Y, '-', 'RAtomic_uint64_t, printed with std::to_string; codes under 200 return before being counted (XrdHttpMon.cc:112): always 0', None)
    if var.startswith('http_plugin.'):
        return (Y, '-', 'RAtomic_uint64_t, printed with std::to_string', None)
    return SEM[var]

WIDTH = {'%d': '32', '%ld': '64', '%lld': '64', '%lu': '64', '%llu': '64', '%s': '-', '%%ld': '64', '%s:%d': '-'}

def section(var):
    if var in ('tod', 'ver', 'src', 'tos', 'pgm', 'ins', 'pid', 'site', 'toe'):
        return 'statistics'
    if var == 'host':
        return 'mpxstats'
    return var.split('.')[0]

def main():
    occ = collections.OrderedDict()
    for t in ALL:
        for var, conv, f, line in compose(t):
            occ.setdefault(var, []).append((t, conv, f, line))
    # shr.use: the %d prints an int holding Shrin; its width is Shrin's type.
    def shrin_width(t):
        d = re.search(r'^(\w+)\s+Shrin\b', show(t, 'src/XrdCms/XrdCmsNode.hh'), re.M)
        return {'int': '32', 'RAtomic_char': '8', 'char': '8'}[d.group(1)]
    rows = []
    for var, o in occ.items():
        runs = []
        for t, conv, f, line in o:
            w = WIDTH[conv]
            if var == 'cmsm.node.i.shr.use':
                w = shrin_width(t)
            sw = sem_of(var)[3]
            if sw and var != 'cmsm.node.i.shr.use':
                w = sw
            if runs and runs[-1]['w'] == w and ALL.index(t) == ALL.index(runs[-1]['last']) + 1:
                runs[-1]['last'] = t
                if t != 'master':
                    runs[-1]['line'] = line; runs[-1]['at'] = t; runs[-1]['f'] = f
            else:
                runs.append(dict(first=t, last=t, w=w, f=f, line=line, at=t))
        # runs that differ only by file (XrdLink.cc -> XrdLinkXeq.cc) stay separate rows: the source moved.
        for r in runs:
            cum, when, note, _ = sem_of(var)
            last = 'current' if r['last'] == 'master' else r['last'][1:]
            rows.append((section(var), var, r['first'][1:], last, cum, r['w'], when,
                         f"{r['f']}:{r['line']}@{r['at']}", note))
    # toe: before the first tag (commits 221881acb .. ee64a7cde^).
    rows.append(('statistics', 'toe', '2009-07', '2010-02', N, '64', '-',
                 'src/Xrd/XrdStats.cc:140@f29a44cf4', SEM['toe'][2]))
    order = []
    for r in rows:
        if r[0] not in order:
            order.append(r[0])
    rows.sort(key=lambda r: order.index(r[0]))
    master = git('rev-parse', 'master').strip()
    mdate = git('log', '-1', '--format=%cs', 'master').strip()
    print(HEADER.format(ntags=len(TAGS), latest=LATEST, master=master[:12], mdate=mdate).strip())
    print('\t'.join(COLUMNS))
    print('\n'.join('\t'.join(r) for r in rows))

COLUMNS = ['section', 'variable', 'first', 'last', 'cumulative', 'width', 'when', 'source', 'note']
HEADER = """
# What each XRootD release sends in its summary monitoring records
# (xrd.report), variable by variable, read from XRootD's own source.
#
# Built by tests/data/xrootd-releases.py from github.com/xrootd/xrootd: the
# {ntags} release tags v3.0.0 .. {latest} (no -rc tags) and master at
# {master} ({mdate}); checked by hand against the code and against the
# real records in tests/data/records (5.5.3) and tests/data/records-5.9
# (6.1.0). Facts only: no code was taken.
#
# Where the records are written ({latest} lines; every row cites its own):
#   header <statistics ...>    src/Xrd/XrdStats.cc:87 (XML), :94 (JSON, since 5.9.0)
#   info, proc, sgen           src/Xrd/XrdStats.cc:400, :418, :257
#   buff                       src/Xrd/XrdBuffer.cc:325 + src/Xrd/XrdBuffXL.cc:201 (since 4.3.0)
#   link                       src/Xrd/XrdLinkXeq.cc:1070 (src/Xrd/XrdLink.cc up to 4.12.9)
#   poll, sched                src/Xrd/XrdPoll.cc:334, src/Xrd/XrdScheduler.cc:632
#   xrootd                     src/XrdXrootd/XrdXrootdStats.cc:83
#   ofs                        src/XrdOfs/XrdOfsStats.cc:40
#   oss                        src/XrdOss/XrdOssApi.cc:458 + src/XrdOss/XrdOssStat.cc:490-503
#   cms, cmsm                  src/XrdCms/XrdCmsCluster.cc:1259, :1282-1291 (cmsm when the
#                              cmsd is a manager: src/XrdCms/XrdCmsProtocol.cc:557)
#   rootd (up to 5.3.4)        src/XrdRootd/XrdRootdProtocol.cc:228 (at v5.3.4)
#   ssi                        src/XrdSsi/XrdSsiStats.cc:89
#   pss, cache                 src/XrdPosix/XrdPosixConfig.cc:569, :574 (called by
#                              src/XrdPss/XrdPss.cc:612 with id "pss"; cache only with a
#                              cache plug-in: type="pfc" (XCache) or "rmc" (memory cache))
#   http_plugin (6.0.0+)       src/XrdHttp/XrdHttpMon.cc:31-71, a set registered with
#                              XrdMonRoll (src/Xrd/XrdMonitor.cc, 5.8.0+): XML
#                              <stats id="http_plugin">, JSON "stats_http_plugin"
#   host (mpxstats -s)         src/XrdApps/XrdMpxXml.cc:282 (XrdMpxStats.cc up to 4.8.6)
#
# Columns (tab-separated; one row per variable and per range of releases
# in which its field kept one width):
#   section     the <stats id> it is in; "statistics": an attribute of the
#               record's root; "mpxstats": added by mpxstats, not xrootd
#   variable    the gateway's name: nested tags joined with '.', list
#               entries (<stats id="N"> in oss paths/space, cmsm node) as 'i'
#   first       first release that sends it; 3.0.0 is the first tag in the
#               repository (the format dates from commit 0c3259dc0,
#               2009-06-23); YYYY-MM: a commit date before any release tag
#   last        last release that sends it; "current": {latest} and master
#   cumulative  yes: a running total, only ever incremented (a counter);
#               no: a level, high-water mark, time, identifier or text
#   width       bits of the C value printed ('-': text); 8 = a char
#   when        sent only under this condition, beyond its section ('-': always)
#   source      file:line@tag (or @commit) of the format that prints it
#   note        what reading the code that fills it showed
#
# No release sends: xrootd.prr (the 2018 reference's example writes <prr>,
# a typo for <err>: its own table and every release say err); cmsc.role and
# cmss.role (2018 reference only; cmsd sends cms or cmsm); the 3.0.x
# <stats id="cms"><name>..<subscriber> format of XrdCmsCluster::Stats, which
# only answered the cms protocol's stats request (XrdCmsNode.cc do_Stats):
# XrdCmsProtocol::Stats returned 0 up to 3.0.5 (XrdCmsProtocol.hh:43@v3.0.5).
# Known defects in what releases send: cache.rd.hits is written
# <hits>N></hits> in every release 5.0.0-5.6.9 (XrdPosixConfig.cc:566@v5.6.9,
# fixed by commit b5d52aa55 in 5.7.0); ssi.rsp.mdb's end tag is </mdb without
# '>' since 4.9.0.
"""

if __name__ == '__main__':
    main()
