#include "download/http_client.h"

#include <curl/curl.h>

#include <cctype>
#include <mutex>
#include <stdexcept>

namespace rapid::download {
namespace {
void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  const HttpRequest* req;
  HttpResponse* resp;
  CURL* curl;
  bool aborted_by_sink = false;
  int to_sink = -1;  // unknown until the first body byte
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    t->resp->headers.clear();  // a redirect's or 100-continue's headers are not the answer's
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string name = line.substr(0, colon), value = line.substr(colon + 1);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.pop_back();
  t->resp->headers[name] = value;
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  if (t->to_sink < 0) {
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    t->to_sink = t->req->sink && status >= 200 && status < 300;
    if (t->to_sink && t->req->on_start) t->req->on_start(status);
  }
  if (t->to_sink) {
    if (!t->req->sink(data, size * n)) {
      t->aborted_by_sink = true;
      return 0;
    }
  } else {
    t->resp->body.append(data, size * n);
  }
  return size * n;
}
}  // namespace

HttpResponse http_request(const HttpRequest& req) {
  global_init();
  CURL* curl = curl_easy_init();
  if (!curl) throw NetworkError("libcurl: cannot create a handle");
  HttpResponse resp;
  Transfer t{&req, &resp, curl};
  curl_slist* headers = nullptr;
  for (auto& h : req.headers) headers = curl_slist_append(headers, h.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "rapid-mlx (huggingface-hub compatible)");
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, req.follow_redirects ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, req.connect_timeout_s);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, req.low_speed_timeout_s);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // thread-safe timeouts
  curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");  // API JSON may come compressed; files do not
  if (req.method == "HEAD") curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  char err[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, err);
  CURLcode rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &resp.status);
  char* eff = nullptr;
  curl_easy_getinfo(curl, CURLINFO_EFFECTIVE_URL, &eff);
  if (eff) resp.effective_url = eff;
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && t.aborted_by_sink)) {
    std::string why = err[0] ? err : curl_easy_strerror(rc);
    throw NetworkError(req.url + ": " + why);
  }
  if (t.aborted_by_sink) throw std::runtime_error(req.url + ": transfer stopped by its receiver");
  return resp;
}

std::string url_escape(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace rapid::download
