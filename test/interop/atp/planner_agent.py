"""

planner_agent.py —— 发送侧 Agent（只发不收）

运行：python planner_agent.py

"""

import asyncio

import time

import uuid

import httpx

RELAY = "http://127.0.0.1:8001"

ME = "planner"

WORKER = "worker"

MY_CALLBACK = "http://127.0.0.1:8010/atp/inbox" # 本 Demo 不监听，占位

TERMINAL = {"timeout", "unreachable", "expired"}

async def register(client):

    r = await client.post(f"{RELAY}/atp/register", json={

        "agent_id": ME,

        "callback_url": MY_CALLBACK,

        "capabilities": ["plan"],

        "lease_seconds": 300,

    })

    r.raise_for_status()

    print("注册:", r.json())

async def wait_receipt(client, message_id, timeout_s):

    deadline = time.time() + timeout_s

    while time.time() < deadline:

        r = await client.get(f"{RELAY}/atp/receipts/{message_id}")

        if r.status_code == 200:

            data = r.json()

            if data["status"] in ("delivered", "timeout", "unreachable", "expired"):

                return data

        await asyncio.sleep(0.2)

    return {"status": "client_timeout", "message_id": message_id, "receipt": None}

async def send_task(client, text, ttl_ms=5000, max_attempts=3):

    message_id = str(uuid.uuid4())

    for attempt in range(1, max_attempts + 1):

        env = {

            "atp_version": "1.0",

            "message_id": message_id,

            "sender": ME,

            "receiver": WORKER,

            "type": "task.request",

            "timestamp": time.time(),

            "ttl_ms": ttl_ms,

            "payload": {"text": text},

        }

        resp = await client.post(f"{RELAY}/atp/send", json=env)

        print(f" 第 {attempt} 次投递 → {resp.status_code} {resp.json().get('status')}")

        result = await wait_receipt(client, message_id, timeout_s=ttl_ms / 1000 + 2)

        if result["status"] == "delivered":

            return result

        print(f" 没拿到回执：{result['status']}")

        if result["status"] in TERMINAL:

            # 服务端已判终态，同一个 id 不会再被路由，换新的重来

            message_id = str(uuid.uuid4())

        await asyncio.sleep(min(0.5 * 2 ** (attempt - 1), 4.0))

    return {"status": "failed", "message_id": message_id}

async def main():

    async with httpx.AsyncClient(timeout=15.0) as client:

        await register(client)

        print("发送任务…")

        result = await send_task(client, "multi agent via relay")

        print("最终结果:", result)

if __name__ == "__main__":

    asyncio.run(main())
