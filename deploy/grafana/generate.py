#!/usr/bin/env python3
"""Writes sandbox-agents.json, the Grafana dashboard of the control plane's /metrics: edit this
and run it (python3 deploy/grafana/generate.py) rather than editing the JSON. Import the JSON
in Grafana (Dashboards > New > Import) and pick the Prometheus data source that scrapes the
servers. A test (crates/api/src/metrics.rs) checks that every metric it queries exists."""
import os
import json
panels=[]
y=0
pid=0
x=0
def row(title):
    global y,pid
    pid+=1
    panels.append({"type":"row","title":title,"id":pid,"gridPos":{"h":1,"w":24,"x":0,"y":y},"collapsed":False,"panels":[]})
    y+=1
def ts(title, targets, unit="short", w=8, desc="", stack=False):
    global x,y,pid
    pid+=1
    if x+w>24:
        x=0; y+=8
    p={"type":"timeseries","title":title,"id":pid,"description":desc,
       "datasource":{"type":"prometheus","uid":"${datasource}"},
       "gridPos":{"h":8,"w":w,"x":x,"y":y},
       "fieldConfig":{"defaults":{"unit":unit,"custom":{"stacking":{"mode":"normal" if stack else "none"}}},"overrides":[]},
       "options":{"legend":{"displayMode":"table","placement":"bottom","calcs":["lastNotNull","max"]},"tooltip":{"mode":"multi"}},
       "targets":[{"datasource":{"type":"prometheus","uid":"${datasource}"},"expr":e,"legendFormat":l,"refId":chr(65+i)} for i,(e,l) in enumerate(targets)]}
    panels.append(p)
    x+=w
def endrow():
    global x,y
    x=0; y+=8
SEL='{job=~"$job"}'
def q(p,m,by,sel=SEL):
    return 'histogram_quantile(%s, sum by (le, %s) (rate(%s_bucket%s[$__rate_interval])))' % (p,by,m,sel)
def r(m, by=None, sel=SEL):
    inner='rate(%s%s[$__rate_interval])' % (m, sel)
    return 'sum by (%s) (%s)' % (by, inner) if by else 'sum(%s)' % inner
row("Sessions and sandboxes")
ts("Sessions by status",[('max by (status) (sandbox_agents_sessions%s)' % SEL,"{{status}}")],desc="Deployment-wide (every process reports the same numbers, hence max).",stack=True)
ts("Boot time p50 / p95 by path",[(q(0.5,"sandbox_agents_session_boot_duration_seconds","path"),"p50 {{path}}"),(q(0.95,"sandbox_agents_session_boot_duration_seconds","path"),"p95 {{path}}")],unit="s",desc="pool: a warm-pool sandbox; cold: a new container; environment: an environment's image.")
ts("Boots and failures per second",[(r("sandbox_agents_session_boot_duration_seconds_count","path"),"booted {{path}}"),(r("sandbox_agents_session_boot_failures_total","path"),"failed {{path}}")],unit="ops")
ts("Warm pool",[('max by (state) (sandbox_agents_warm_pool_sandboxes%s)' % SEL,"{{state}}")])
ts("Warm pool claims per second",[(r("sandbox_agents_warm_pool_claims_total","outcome"),"{{outcome}}")],unit="ops",desc="A miss creates a container: raise --warm-pool-size when misses are common.")
ts("Commands p50 / p95 by outcome",[(q(0.5,"sandbox_agents_exec_duration_seconds","outcome"),"p50 {{outcome}}"),(q(0.95,"sandbox_agents_exec_duration_seconds","outcome"),"p95 {{outcome}}")],unit="s")
endrow()
row("Runs, models and tools")
ts("Runs started and finished per second",[(r("sandbox_agents_runs_started_total"),"started"),(r("sandbox_agents_runs_finished_total","status"),"finished {{status}}")],unit="ops")
ts("Runs in flight",[('max(sandbox_agents_runs_in_flight%s)' % SEL,"running"),('max(sandbox_agents_runs_queued%s)' % SEL,"waiting for a slot")])
ts("Run duration p50 / p95",[(q(0.5,"sandbox_agents_run_duration_seconds","status"),"p50 {{status}}"),(q(0.95,"sandbox_agents_run_duration_seconds","status"),"p95 {{status}}")],unit="s")
ts("Model calls per second by model and outcome",[(r("sandbox_agents_model_request_duration_seconds_count","model, outcome"),"{{model}} {{outcome}}")],unit="ops")
ts("Model latency p95 by model",[(q(0.95,"sandbox_agents_model_request_duration_seconds","model"),"{{model}}")],unit="s")
ts("Tokens per second by model",[(r("sandbox_agents_model_tokens_total","model, type"),"{{model}} {{type}}")])
ts("Model error ratio",[(r("sandbox_agents_model_request_duration_seconds_count","model",'{job=~"$job",outcome!~"ok|cancelled"}')+' / '+r("sandbox_agents_model_request_duration_seconds_count","model"),"{{model}}")],unit="percentunit")
ts("Tool calls per second by tool",[(r("sandbox_agents_tool_call_duration_seconds_count","tool"),"{{tool}}")],unit="ops")
ts("Tool call p95 by tool",[(q(0.95,"sandbox_agents_tool_call_duration_seconds","tool"),"{{tool}}")],unit="s")
endrow()
row("Event log, streams and webhooks")
ts("Events appended per second",[(r("sandbox_agents_events_appended_total"),"appended")],unit="ops")
ts("SSE streams open",[('sum by (instance) (sandbox_agents_sse_streams_open%s)' % SEL,"{{instance}}")],desc="Per process: a stream is held by the process its client connected to.",stack=True)
ts("SSE events sent per second",[(r("sandbox_agents_sse_events_sent_total"),"sent")],unit="ops")
ts("Webhook attempts per second by outcome",[(r("sandbox_agents_webhook_attempts_total","outcome"),"{{outcome}}")],unit="ops")
ts("Webhook attempt p50 / p95",[(q(0.5,"sandbox_agents_webhook_attempt_duration_seconds","outcome"),"p50 {{outcome}}"),(q(0.95,"sandbox_agents_webhook_attempt_duration_seconds","outcome"),"p95 {{outcome}}")],unit="s")
ts("Webhook queue",[('max(sandbox_agents_webhook_queue_depth%s)' % SEL,"waiting"),('max(sandbox_agents_webhook_queue_oldest_seconds%s)' % SEL,"oldest (s)")],desc="Deliveries not yet delivered or given up on, and the oldest one's age.")
endrow()
row("HTTP and database")
ts("HTTP requests per second by status",[(r("sandbox_agents_http_request_duration_seconds_count","status"),"{{status}}")],unit="ops",stack=True)
ts("HTTP p95 by route (streams left out)",[('topk(10, %s)' % q(0.95,"sandbox_agents_http_request_duration_seconds","method, route",'{job=~"$job",route!~".*/stream|.*/terminal"}'),"{{method}} {{route}}")],unit="s")
ts("Database connections by process",[('sum by (instance, state) (sandbox_agents_db_pool_connections%s)' % SEL,"{{instance}} {{state}}"),('max(sandbox_agents_db_pool_max_connections%s)' % SEL,"max per process")])
ts("Event listener reconnects",[('sum by (instance) (increase(sandbox_agents_event_listener_reconnects_total%s[$__rate_interval]))' % SEL,"{{instance}}")],desc="The LISTEN connection of the live event feed; streams poll the database while it is down.")
endrow()
dash={
 "title":"Sandbox Agents","uid":"sandbox-agents","tags":["sandbox-agents"],"timezone":"browser","schemaVersion":39,"version":1,
 "refresh":"30s","time":{"from":"now-6h","to":"now"},
 "description":"The control plane's /metrics (README, Metrics). Gauges of the deployment are reported alike by every process, hence max(); counters and histograms are per process, hence sum of rates.",
 "templating":{"list":[
   {"name":"datasource","type":"datasource","query":"prometheus","label":"Data source","current":{}},
   {"name":"job","type":"query","label":"Job","datasource":{"type":"prometheus","uid":"${datasource}"},"query":{"query":"label_values(sandbox_agents_sessions, job)","refId":"job"},"definition":"label_values(sandbox_agents_sessions, job)","includeAll":True,"multi":True,"current":{"text":"All","value":"$__all"},"refresh":2}
 ]},
 "panels":panels}
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'sandbox-agents.json'),'w').write(json.dumps(dash,indent=2)+"\n")
