"""

worker_agent.py —— 接收侧 Agent

运行：uvicorn worker_agent:app --port 8002

"""

import asyncio

import os

import time

from typing import Any, Dict, Set

import httpx

from fastapi import FastAPI

RELAY = os.getenv("ATP_RELAY", "http://127.0.0.1:8001")

AGENT_ID = os.getenv("ATP_AGENT_ID", "worker")

CALLBACK = os.getenv("ATP_CALLBACK", "http://127.0.0.1:8002/atp/inbox")

app = FastAPI(title=f"ATP Agent {AGENT_ID}")

SEEN: Set[str] = set()

@app.post("/atp/inbox")

async def inbox(env: Dict[str, Any]) -> Dict[str, Any]:

    mid = env["message_id"]

    # 幂等：重投可能把同一条消息送多次

    if mid in SEEN:

        return {"status": "duplicate", "message_id": mid, "code": 200,

                "detail": "已处理过，直接返回回执"}

    if env["type"] != "task.request":

        return {"status": "rejected", "message_id": mid, "code": 415,

                "detail": f"不认识的 type: {env['type']}"}

    text = env.get("payload", {}).get("text", "")

    if not text:

        return {"status": "rejected", "message_id": mid, "code": 400,

                "detail": "payload.text 为空"}

    SEEN.add(mid)

    await asyncio.sleep(0.3) # 假装在干活

    return {"status": "accepted", "message_id": mid, "code": 200, "detail": "ok",

            "handled_by": AGENT_ID, "handled_at": time.time(),

            "result": {"text": text[::-1]}}

@app.on_event("startup")

async def register_self():

    async with httpx.AsyncClient(timeout=5.0) as client:

        for _ in range(10):

            try:

                r = await client.post(f"{RELAY}/atp/register", json={

                    "agent_id": AGENT_ID,

                    "callback_url": CALLBACK,

                    "capabilities": ["text.reverse"],

                    "lease_seconds": 300,

                })

                if r.status_code == 200:

                    print(f"[{AGENT_ID}] 注册成功: {r.json()}")

                    return

            except Exception as exc:

                print(f"[{AGENT_ID}] 注册失败({type(exc).__name__})，1 秒后重试")

            await asyncio.sleep(1.0)

    print(f"[{AGENT_ID}] 多次注册失败，请检查中转服务器是否已启动: {RELAY}")
