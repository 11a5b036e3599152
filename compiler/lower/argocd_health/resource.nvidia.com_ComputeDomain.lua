-- Argo CD health of an NVIDIA ComputeDomain (resource.nvidia.com), written by gpuc.
-- Nodes join a ComputeDomain only when the workload pods that use its channel are scheduled, and gpuc
-- applies it in an earlier sync wave than those pods' NIMService: with no node yet it is Healthy, or the
-- sync would wait forever. Once nodes have joined, an IMEX daemon that is not Ready is reported; the
-- usual cause of one that never gets Ready is the host's own nvidia-imex service holding the channel.
local hs = {status = "Healthy", message = "no node has joined yet: IMEX daemons start with the first workload pod"}
local status = obj.status
if status == nil or status.nodes == nil or #status.nodes == 0 then
  return hs
end
local ready, waiting = 0, {}
for _, n in ipairs(status.nodes) do
  if n.status == "Ready" then
    ready = ready + 1
  else
    table.insert(waiting, n.name)
  end
end
local want = 0
if obj.spec ~= nil and obj.spec.numNodes ~= nil then want = obj.spec.numNodes end
if #waiting > 0 or (want > 0 and status.status ~= "Ready") then
  hs.status = "Progressing"
  hs.message = ready .. " of " .. #status.nodes .. " IMEX daemon(s) ready"
  if want > 0 then hs.message = hs.message .. " (numNodes " .. want .. ")" end
  if #waiting > 0 then
    hs.message = hs.message .. "; not ready: " .. table.concat(waiting, ", ")
      .. " (if it stays so, check that the host nvidia-imex service is disabled on those nodes)"
  end
  return hs
end
hs.message = "ready on " .. ready .. " node(s)"
return hs
