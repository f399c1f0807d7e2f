// For unit tests: a Store in a temp dir of its own, both gone at the end (the dir with
// everything in it). Check ok(); a gtest failure says why it is not.
#ifndef KVNODE_AGENT_STORE_TEMP_STORE_H_
#define KVNODE_AGENT_STORE_TEMP_STORE_H_

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "agent/base/file_tree.h"
#include "agent/store/store.h"
#include "gtest/gtest.h"

namespace kvnode {

class TempStore {
 public:
  // The dir is /tmp/<name>-XXXXXX, the store <dir>/kvnode.db.
  explicit TempStore(const std::string& name) {
    std::string tmpl = "/tmp/" + name + "-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << tmpl << ": " << strerror(errno);
      return;
    }
    dir_ = tmpl;
    auto store = Store::Open(dir_ + "/kvnode.db");
    if (!store.ok()) {
      ADD_FAILURE() << store.status();
      return;
    }
    store_ = std::move(*store);
  }
  ~TempStore() {
    store_.reset();
    if (!dir_.empty()) RemoveTreeUnder("/tmp", dir_.substr(5));
  }
  TempStore(const TempStore&) = delete;
  TempStore& operator=(const TempStore&) = delete;

  bool ok() const { return store_ != nullptr; }
  const std::string& dir() const { return dir_; }
  Store* store() const { return store_.get(); }

 private:
  std::string dir_;
  std::unique_ptr<Store> store_;
};

}  // namespace kvnode

#endif  // KVNODE_AGENT_STORE_TEMP_STORE_H_
