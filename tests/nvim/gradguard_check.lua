-- Drive gradguard's language server from a real Neovim (0.7+, headless).
--
--   GG_CMD='["python","-I","-m","gradguard","serve"]' GG_FILE=/path/train.py \
--     nvim --headless --clean -c 'luafile tests/nvim/gradguard_check.lua'
--
-- Opens GG_FILE, attaches the server, waits for diagnostics, asks for a hover
-- and the code actions of the first diagnostic, applies the preferred quick
-- fix, waits for the diagnostics to clear, and prints one JSON line:
-- {"diagnostics": [...], "hover": "...", "actions": [...], "after": [...], "text": "..."}
-- Uses only APIs present in Neovim 0.7 (vim.lsp.start_client / buf_attach_client).

local out = { errors = {} }

local function emit_and_quit()
  io.stdout:write(vim.fn.json_encode(out) .. "\n")
  io.stdout:flush()
  vim.cmd("qall!")
end

local function fail(msg)
  table.insert(out.errors, msg)
  emit_and_quit()
end

local ok, err = pcall(function()
  local cmd = vim.fn.json_decode(os.getenv("GG_CMD"))
  local file = os.getenv("GG_FILE")
  local timeout = tonumber(os.getenv("GG_TIMEOUT") or "30000")

  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  local uri = vim.uri_from_bufnr(buf)

  local client_id = vim.lsp.start_client({
    name = "gradguard",
    cmd = cmd,
    root_dir = vim.fn.fnamemodify(file, ":p:h"),
    init_options = { debounce = 20 },
    settings = { gradguard = { debounce = 20 } },
  })
  if not client_id then
    return fail("could not start the server")
  end
  vim.lsp.buf_attach_client(buf, client_id)

  local function snapshot()
    local items = {}
    for _, d in ipairs(vim.diagnostic.get(buf)) do
      table.insert(items, {
        lnum = d.lnum, col = d.col, end_lnum = d.end_lnum, end_col = d.end_col,
        code = d.code, source = d.source, message = d.message, severity = d.severity,
      })
    end
    return items
  end

  if not vim.wait(timeout, function() return #vim.diagnostic.get(buf) > 0 end, 50) then
    return fail("no diagnostics within " .. timeout .. " ms")
  end
  out.diagnostics = snapshot()
  local first = vim.diagnostic.get(buf)[1]

  -- hover inside the first diagnostic
  local hover = vim.lsp.buf_request_sync(buf, "textDocument/hover", {
    textDocument = { uri = uri },
    position = { line = first.lnum, character = first.col + 1 },
  }, timeout)
  for _, res in pairs(hover or {}) do
    if res.result and res.result.contents then
      out.hover = res.result.contents.value or res.result.contents
    end
  end

  -- code actions for that line, with the diagnostics Neovim hands back
  local line_diags = vim.lsp.diagnostic.get_line_diagnostics(buf, first.lnum)
  local actions = vim.lsp.buf_request_sync(buf, "textDocument/codeAction", {
    textDocument = { uri = uri },
    range = { start = { line = first.lnum, character = first.col }, ["end"] = { line = first.lnum, character = first.col } },
    context = { diagnostics = line_diags },
  }, timeout)
  out.actions = {}
  local preferred
  for _, res in pairs(actions or {}) do
    for _, a in ipairs(res.result or {}) do
      table.insert(out.actions, { title = a.title, kind = a.kind, isPreferred = a.isPreferred or false })
      if a.isPreferred and a.edit and not preferred then
        preferred = a
      end
    end
  end
  if not preferred then
    return fail("no preferred quick fix")
  end

  local client = vim.lsp.get_client_by_id(client_id)
  vim.lsp.util.apply_workspace_edit(preferred.edit, client.offset_encoding or "utf-16")
  out.text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")

  if not vim.wait(timeout, function() return #vim.diagnostic.get(buf) == 0 end, 50) then
    out.after = snapshot()
    return fail("diagnostics did not clear after the fix")
  end
  out.after = snapshot()
  vim.lsp.stop_client(client_id)
  vim.wait(2000, function() return vim.lsp.client_is_stopped(client_id) end, 50)
  emit_and_quit()
end)

if not ok then
  fail(tostring(err))
end
