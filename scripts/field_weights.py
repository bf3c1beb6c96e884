import json, sys, tempfile, time, itertools
from pathlib import Path
import numpy as np
from palace_cli.textindex import TextIndex, Doc
from palace_cli.palace import Palace
from palace_cli.refresh import refresh, indexes
from palace_cli.bench.retrieval import load_queries, query_metrics

def eval_index(ti, queries, weights, k=10):
    ms=[]
    for q in queries:
        ranked=[i for i,_ in ti.search(q[0], limit=k, field_weights=weights)]
        ms.append(query_metrics(ranked, q[1]))
    return {m: round(float(np.mean([x[m] for x in ms])),4) for m in ("recall@1","recall@3","mrr","ndcg@10")}

# SciFact
d=Path('/work/shared/data/scifact')
tmp=Path(tempfile.mkdtemp())
ti=TextIndex(tmp/'w')
docs=[json.loads(l) for l in open(d/'corpus.jsonl')]
t=time.time()
ti.apply((Doc(x['_id'],x['_id'],'all',x.get('title',''),'', '', '', x['text']) for x in docs), [])
print('scifact build', round(time.time()-t,1),'s')
qs={json.loads(l)['_id']:json.loads(l)['text'] for l in open(d/'queries.jsonl')}
rel={}
for i,l in enumerate(open(d/'qrels/test.tsv')):
    if i==0: continue
    a,b,c=l.split('\t'); 
    if int(c)>0: rel.setdefault(a,[]).append(b)
sq=[(qs[q],r) for q,r in rel.items()]
p=Palace(Path('example-palace')); refresh(p)
eq=[(q.query,q.expected) for q in load_queries(Path('example-palace/queries.jsonl')) if q.expected]
grid=[
 dict(subject=1,keywords=1,anchor=0.5,image=0.2,content=1,domain=0),
 dict(subject=1.2,keywords=1.2,anchor=0.6,image=0.2,content=1,domain=0),
 dict(subject=1,keywords=1.2,anchor=0.8,image=0.3,content=1,domain=0),
]
grid0=[
 dict(subject=1,keywords=1,anchor=1,image=1,content=1,domain=1),
 dict(subject=3,keywords=2.5,anchor=1.5,image=0.6,content=1,domain=0.5),
 dict(subject=2,keywords=2,anchor=1,image=0.5,content=1,domain=0.5),
 dict(subject=2,keywords=2,anchor=1,image=0.3,content=1,domain=0),
 dict(subject=1.5,keywords=1.5,anchor=0.5,image=0.3,content=1,domain=0),
 dict(subject=2,keywords=1.5,anchor=0.5,image=0.5,content=1,domain=0.3),
 dict(subject=1,keywords=1,anchor=0.5,image=0,content=1,domain=0),
 dict(subject=4,keywords=3,anchor=1,image=0.5,content=1,domain=0.5),
]
for g in grid:
    print(g, 'example', eval_index(indexes(p).text, eq, g), 'scifact', eval_index(ti, sq, g))
