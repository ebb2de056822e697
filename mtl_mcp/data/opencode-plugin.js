// Written by `mtl-mcp install opencode`: mtl-mcp's session hooks for opencode.
// `mtl-mcp uninstall opencode` removes this file; edit the copy in the mtl-mcp package.
//
// opencode has plugins, not shell hooks: this one runs `mtl-mcp hook <event>` with a JSON
// payload on stdin, as the other clients' hooks do, and puts what it prints where opencode
// lets a plugin add text. A hook that fails or says nothing changes nothing.
//   session.created     -> session-start: the context, added to the session's system prompt
//   tool.execute.after  -> tool-use: the lessons for the plan the model stated, appended to
//                          the tool's output (once per task, decided by mtl-mcp)
//   session.idle        -> session-end: the session, as a transcript mtl-mcp can distil
import { mkdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"

const MTL_MCP = __MTL_MCP_COMMAND__
const MTL_MCP_ENV = __MTL_MCP_ENV__
const CLIENT = "opencode"

async function hook(event, payload) {
  try {
    const child = Bun.spawn([...MTL_MCP, "hook", event], {
      stdin: new Blob([JSON.stringify({ client: CLIENT, ...payload })]),
      stdout: "pipe",
      stderr: "ignore",
      env: { ...process.env, ...MTL_MCP_ENV },
    })
    const out = await new Response(child.stdout).text()
    await child.exited
    return out.trim()
  } catch {
    return ""
  }
}

function context(out) {
  if (!out) return ""
  try {
    const answer = JSON.parse(out)
    return typeof answer.additionalContext === "string" ? answer.additionalContext : ""
  } catch {
    return out
  }
}

export const MtlMcp = async ({ client, directory }) => {
  const starts = new Map() // session -> the session-start context (a promise)
  const turns = new Map() // session -> the id of the user message that started the task
  const said = new Map() // session -> Map(part id -> the assistant's text since a tool call)
  const users = new Set() // ids of user messages, whose text parts are the prompt

  async function transcript(sessionID) {
    // The session as JSON lines of {role, content}: a format `mtl-mcp distill` reads.
    const answer = await client.session.messages({ path: { id: sessionID } })
    const lines = []
    for (const { info, parts } of answer.data ?? []) {
      for (const part of parts ?? []) {
        if (part.type === "text" && part.text && !part.synthetic) {
          lines.push({ role: info.role, content: part.text })
        } else if (part.type === "tool" && part.state?.status === "completed") {
          const call = `${part.tool} ${JSON.stringify(part.state.input ?? {})}`
          lines.push({ role: "assistant", content: `[tool call] ${call}` })
          lines.push({ role: "tool", content: String(part.state.output ?? "") })
        }
      }
    }
    if (!lines.some((line) => line.role === "user")) return null
    const folder = join(process.env.XDG_DATA_HOME || join(process.env.HOME, ".local", "share"),
      "opencode", "mtl-mcp-transcripts")
    mkdirSync(folder, { recursive: true, mode: 0o700 })
    const path = join(folder, `${sessionID}.jsonl`)
    writeFileSync(path, lines.map((line) => JSON.stringify(line)).join("\n") + "\n",
      { mode: 0o600 })
    return path
  }

  return {
    event: async ({ event }) => {
      const properties = event.properties ?? {}
      if (event.type === "session.created" && !properties.info?.parentID) {
        const id = properties.info.id
        starts.set(id, hook("session-start", { session_id: id, cwd: directory,
          hook_event_name: "session.created" }).then(context))
      } else if (event.type === "message.part.updated") {
        const part = properties.part
        if (part?.type === "text" && !users.has(part.messageID) && !part.synthetic) {
          if (!said.has(part.sessionID)) said.set(part.sessionID, new Map())
          said.get(part.sessionID).set(part.id, part.text ?? "")
        }
      } else if (event.type === "session.idle") {
        const id = properties.sessionID
        const path = await transcript(id).catch(() => null)
        if (path) {
          await hook("session-end", { session_id: id, cwd: directory, transcript_path: path,
            hook_event_name: "session.idle" })
        }
      }
    },
    "chat.message": async (input, output) => {
      const id = output.message?.id ?? input.messageID
      if (id) {
        users.add(id)
        turns.set(input.sessionID, id)
      }
      said.delete(input.sessionID)
    },
    "experimental.chat.system.transform": async (input, output) => {
      const text = input.sessionID ? await starts.get(input.sessionID) : ""
      if (text) output.system.push(text)
    },
    "tool.execute.after": async (input, output) => {
      const parts = said.get(input.sessionID)
      const text = parts ? [...parts.values()].join("\n") : ""
      said.delete(input.sessionID)
      const notes = context(await hook("tool-use", {
        hook_event_name: "tool.execute.after",
        session_id: input.sessionID,
        turn_id: turns.get(input.sessionID) ?? null,
        tool_name: input.tool,
        tool_input: input.args ?? {},
        tool_use_id: input.callID,
        cwd: directory,
        assistant_text: text,
      }))
      if (!notes) return
      if (typeof output.output === "string") {
        output.output = `${output.output}\n\n${notes}`
      } else if (Array.isArray(output.content)) {
        output.content.push({ type: "text", text: notes }) // an MCP tool's raw result
      }
    },
  }
}
